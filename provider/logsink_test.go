package provider

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

type sent struct {
	stream rpc.LogStream
	text   string
}

func recordingSink() (*logSink, func() []sent) {
	var mu sync.Mutex
	var got []sent
	s := newLogSink(context.Background())
	s.send = func(_ context.Context, st rpc.LogStream, text string) error {
		mu.Lock()
		got = append(got, sent{st, text})
		mu.Unlock()
		return nil
	}
	return s, func() []sent { mu.Lock(); defer mu.Unlock(); return append([]sent(nil), got...) }
}

func TestLogSinkSendsFirstBytesAtOnceAndCoalescesTheRest(t *testing.T) {
	s, got := recordingSink()
	require.NoError(t, s.write("stdout", "a"))
	require.Equal(t, []sent{{rpc.Stdout, "a"}}, got(), "the first bytes after a quiet spell are not held back")
	for range 100 {
		require.NoError(t, s.write("stdout", "b"))
	}
	require.NoError(t, s.write("stderr", "e"))
	require.NoError(t, s.write("stdout", "c"))
	s.close()
	all := got()
	var out, errs strings.Builder
	for _, g := range all {
		if g.stream == rpc.Stdout {
			out.WriteString(g.text)
		} else {
			errs.WriteString(g.text)
		}
	}
	require.Equal(t, "a"+strings.Repeat("b", 100)+"c", out.String(), "order and bytes kept")
	require.Equal(t, "e", errs.String())
	require.Less(t, len(all), 20, "103 writes were batched into few notifications")
	// Nothing is sent after close.
	require.NoError(t, s.write("stdout", "late"))
	require.Equal(t, len(all), len(got()))
}

func TestLogSinkFullBatchGoesOutImmediately(t *testing.T) {
	s, got := recordingSink()
	require.NoError(t, s.write("stdout", "x"))
	big := strings.Repeat("y", coalesceMax)
	require.NoError(t, s.write("stdout", big))
	require.Len(t, got(), 2, "a full batch does not wait for the window")
	s.close()
}

func TestLogSinkStopsAfterTheHostRefuses(t *testing.T) {
	s := newLogSink(context.Background())
	calls := 0
	s.send = func(context.Context, rpc.LogStream, string) error { calls++; return errors.New("answered") }
	require.NoError(t, s.write("stdout", "a"))
	require.NoError(t, s.write("stdout", strings.Repeat("b", coalesceMax)))
	s.close()
	require.Equal(t, 1, calls)
}
