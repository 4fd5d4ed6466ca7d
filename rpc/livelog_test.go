package rpc

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type sent struct {
	stream LogStream
	text   string
}

func recordingSink() (*LiveLog, func() []sent) {
	var mu sync.Mutex
	var got []sent
	s := NewLiveLog(context.Background())
	s.send = func(_ context.Context, st LogStream, text string) error {
		mu.Lock()
		got = append(got, sent{st, text})
		mu.Unlock()
		return nil
	}
	return s, func() []sent { mu.Lock(); defer mu.Unlock(); return append([]sent(nil), got...) }
}

func TestLogSinkSendsFirstBytesAtOnceAndCoalescesTheRest(t *testing.T) {
	s, got := recordingSink()
	require.NoError(t, s.Write("stdout", "a"))
	require.Equal(t, []sent{{Stdout, "a"}}, got(), "the first bytes after a quiet spell are not held back")
	for range 100 {
		require.NoError(t, s.Write("stdout", "b"))
	}
	require.NoError(t, s.Write("stderr", "e"))
	require.NoError(t, s.Write("stdout", "c"))
	s.Close(false)
	all := got()
	var out, errs strings.Builder
	for _, g := range all {
		if g.stream == Stdout {
			out.WriteString(g.text)
		} else {
			errs.WriteString(g.text)
		}
	}
	require.Equal(t, "a"+strings.Repeat("b", 100)+"c", out.String(), "order and bytes kept")
	require.Equal(t, "e", errs.String())
	require.Less(t, len(all), 20, "103 writes were batched into few notifications")
	// Nothing is sent after close.
	require.NoError(t, s.Write("stdout", "late"))
	require.Equal(t, len(all), len(got()))
}

func TestLogSinkFullBatchGoesOutImmediately(t *testing.T) {
	s := NewLiveLog(context.Background())
	s.window = time.Hour // only a full batch can go out before close
	sends := make(chan sent, 4)
	s.send = func(_ context.Context, st LogStream, text string) error { sends <- sent{st, text}; return nil }
	require.NoError(t, s.Write("stdout", "x"))
	require.Equal(t, sent{Stdout, "x"}, <-sends)
	big := strings.Repeat("y", pendingMax)
	require.NoError(t, s.Write("stdout", big))
	require.True(t, <-sends == sent{Stdout, big}, "a full batch does not wait for the window")
	s.Close(false)
	require.Empty(t, sends)
}

// TestLogSinkHoldsBulkOutputForTheWindow: bulk output after a quiet spell
// (a log snapshot's worth, most often read just before the command's end)
// does not go out at once like a prompt would: it waits for the window,
// and when the result comes first it is dropped, so the host parses
// those bytes once, in the result. Without a result it is sent.
func TestLogSinkHoldsBulkOutputForTheWindow(t *testing.T) {
	for _, drop := range []bool{true, false} {
		s, got := recordingSink()
		s.window = time.Hour
		bulk := strings.Repeat("b", burstMax)
		require.NoError(t, s.Write("stdout", bulk))
		require.NoError(t, s.Write("stdout", "c"))
		require.Zero(t, len(got()), "bulk output waits for the window")
		s.Close(drop)
		all := got()
		if drop {
			require.Zero(t, len(all), "dropped: the result holds it")
		} else {
			require.Len(t, all, 1)
			require.True(t, all[0] == sent{Stdout, bulk + "c"}, "sent in one chunk")
		}
	}
	// The window does fire for it.
	s := NewLiveLog(context.Background())
	s.window = time.Millisecond
	sends := make(chan sent, 1)
	s.send = func(_ context.Context, st LogStream, text string) error { sends <- sent{st, text}; return nil }
	require.NoError(t, s.Write("stderr", strings.Repeat("e", burstMax)))
	require.True(t, <-sends == sent{Stderr, strings.Repeat("e", burstMax)})
	s.Close(false)
}

// TestLogSinkGathersWhileTheHostWriterIsBusy: writes made while a send
// to the host is under way return at once (the command's output keeps
// being read) and go out together in the next chunk.
func TestLogSinkGathersWhileTheHostWriterIsBusy(t *testing.T) {
	s := NewLiveLog(context.Background())
	s.window = time.Hour
	started, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var got []sent
	s.send = func(_ context.Context, st LogStream, text string) error {
		mu.Lock()
		got = append(got, sent{st, text})
		first := len(got) == 1
		mu.Unlock()
		if first {
			close(started)
			<-release
		}
		return nil
	}
	go func() { _ = s.Write("stdout", "a") }() // sent at once, and held
	<-started
	wrote := make(chan struct{})
	go func() {
		for range 100 {
			_ = s.Write("stdout", "b")
		}
		close(wrote)
	}()
	select {
	case <-wrote:
	case <-time.After(time.Minute):
		t.Fatal("writes waited for the send under way")
	}
	close(release)
	s.Close(false)
	require.Equal(t, []sent{{Stdout, "a"}, {Stdout, strings.Repeat("b", 100)}}, got)
}

// TestLogSinkCloseDropsPendingChunks: chunks still gathered when the
// execute has its result are dropped (the result holds their bytes); on
// an error answer they are sent, since the host gets no result.
func TestLogSinkCloseDropsPendingChunks(t *testing.T) {
	for _, drop := range []bool{true, false} {
		s, got := recordingSink()
		s.window = time.Hour
		require.NoError(t, s.Write("stdout", "a"))
		require.NoError(t, s.Write("stdout", "b"))
		require.NoError(t, s.Write("stderr", "c"))
		s.Close(drop)
		want := []sent{{Stdout, "a"}}
		if !drop {
			want = append(want, sent{Stdout, "b"}, sent{Stderr, "c"})
		}
		require.Equal(t, want, got(), "drop %v", drop)
	}
}

func TestLogSinkStopsAfterTheHostRefuses(t *testing.T) {
	s := NewLiveLog(context.Background())
	calls := 0
	s.send = func(context.Context, LogStream, string) error { calls++; return errors.New("answered") }
	require.NoError(t, s.Write("stdout", "a"))
	require.NoError(t, s.Write("stdout", strings.Repeat("b", pendingMax)))
	s.Close(false)
	require.Equal(t, 1, calls)
}

// Output written after the host refused more, or after Close, is dropped
// at once: nothing gathers in memory that will never be sent.
func TestLogSinkKeepsNothingAfterItsEnd(t *testing.T) {
	refused := NewLiveLog(context.Background())
	refused.send = func(context.Context, LogStream, string) error { return errors.New("answered") }
	require.NoError(t, refused.Write("stdout", "a")) // quiet until now: sent at once, and refused
	require.NoError(t, refused.Write("stdout", strings.Repeat("b", 1000)))
	refused.mu.Lock()
	require.True(t, refused.failed)
	require.Zero(t, refused.size)
	require.Empty(t, refused.pending)
	refused.mu.Unlock()

	closed := NewLiveLog(context.Background())
	sent := 0
	closed.send = func(context.Context, LogStream, string) error { sent++; return nil }
	closed.Close(false)
	require.NoError(t, closed.Write("stdout", strings.Repeat("c", 1000)))
	closed.mu.Lock()
	require.Zero(t, closed.size)
	require.Empty(t, closed.pending)
	closed.mu.Unlock()
	require.Zero(t, sent, "nothing is sent after Close")
}
