package bound

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCallLeavesCallerDeadlinesAlone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Call(ctx, "op", time.Hour, func(ctx context.Context) error { return ctx.Err() })
	require.ErrorIs(t, err, context.Canceled)
	var lt *TimeoutError
	require.False(t, errors.As(err, &lt), "the caller's own cancellation is not a liveness timeout")
	require.NoError(t, Call(context.Background(), "op", 0, func(context.Context) error { return nil }))
}

func TestCallNamesTheCallTheBoundCutOff(t *testing.T) {
	// fn waits for its own context: only the bound can end it.
	err := Call(context.Background(), "sandbox.refreshData", 20*time.Millisecond, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	var lt *TimeoutError
	require.ErrorAs(t, err, &lt)
	require.Equal(t, "sandbox.refreshData", lt.Op)
	require.Equal(t, `Daytona sandbox liveness call "sandbox.refreshData" did not respond within 20 ms; the sandbox connection is unresponsive.`, err.Error())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// A call that ends in time keeps its own answer.
	mine := errors.New("mine")
	require.ErrorIs(t, Call(context.Background(), "op", time.Hour, func(context.Context) error { return mine }), mine)
}
