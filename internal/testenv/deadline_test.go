package testenv

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDeadlinePassesOnExpireAndReachesDerivedContexts(t *testing.T) {
	d := NewDeadline(context.Background())
	child, cancel := context.WithCancel(d)
	defer cancel()
	require.NoError(t, d.Err())
	require.NoError(t, child.Err())
	d.Expire()
	d.Expire() // idempotent
	<-child.Done()
	require.ErrorIs(t, d.Err(), context.DeadlineExceeded)
	require.ErrorIs(t, child.Err(), context.DeadlineExceeded, "a derived context sees a deadline, not a cancellation")
}
