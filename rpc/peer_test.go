package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// peer is the host's end of an in-process Serve over pipes.
type peer struct {
	t     testing.TB
	w     *io.PipeWriter
	lines chan string
	done  chan error
}

func startPeer(t testing.TB, reg *Registry, opts Options) *peer {
	t.Helper()
	before := runtime.NumGoroutine()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	if reg == nil {
		reg = NewRegistry()
	}
	opts.Registry = reg
	p := &peer{t: t, w: inW, lines: make(chan string, 1024), done: make(chan error, 1)}
	go func() {
		p.done <- Serve(context.Background(), inR, outW, opts)
		outW.Close()
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 256<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case err := <-p.done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return after stdin closed")
		}
		for range p.lines { // drain
		}
		waitFor(t, func() bool { return runtime.NumGoroutine() <= before }, "goroutines leaked: %d > %d", runtime.NumGoroutine(), before)
	})
	return p
}

// end closes the worker's stdin and waits for Serve to return, so all it
// will ever write (answers, logs) is written.
func (p *peer) end() {
	p.t.Helper()
	p.w.Close()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup's own check
		require.NoError(p.t, err)
	case <-time.After(10 * time.Second):
		p.t.Fatal("Serve did not return after stdin closed")
	}
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t testing.TB, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf(msg, args...)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond) // polling a condition, not synchronising
	}
}

func (p *peer) send(line string) {
	p.t.Helper()
	_, err := io.WriteString(p.w, line+"\n")
	require.NoError(p.t, err)
}

func (p *peer) recvRaw() string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		require.True(p.t, ok, "worker output closed")
		return l
	case <-time.After(10 * time.Second):
		p.t.Fatal("no frame from the worker within 10s")
		return ""
	}
}

func (p *peer) recv() map[string]any {
	p.t.Helper()
	l := p.recvRaw()
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(l))
	d.UseNumber()
	require.NoError(p.t, d.Decode(&m), "frame is not a JSON object: %q", l)
	require.Equal(p.t, "2.0", m["jsonrpc"], "frame: %s", l)
	return m
}

func errCode(t testing.TB, m map[string]any) int64 {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	require.True(t, ok, "expected an error response, got %v", m)
	n, err := e["code"].(json.Number).Int64()
	require.NoError(t, err)
	return n
}

// logsUntilAnswer reads up to the next answer and returns it with the
// params of the execute.log notifications before it, each checked to be
// one for invocation inv.
func (p *peer) logsUntilAnswer(inv string) (logs []map[string]any, answer map[string]any) {
	p.t.Helper()
	for {
		m := p.recv()
		if _, ok := m["id"]; ok {
			return logs, m
		}
		require.Equal(p.t, "execute.log", m["method"])
		require.Equal(p.t, inv, m["paperclipInvocationId"])
		logs = append(logs, m["params"].(map[string]any))
	}
}
