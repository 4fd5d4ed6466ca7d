package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"strings"
	"sync"
	"time"
)

// sim is cmd/daytona-sim as a child process.
type sim struct {
	cmd            *osexec.Cmd
	stdin          io.WriteCloser
	apiURL, apiKey string
}

func startSim(ctx context.Context, bin string) (*sim, error) {
	// -stop-on-eof: closing the pipe stops it, and so does our own death.
	cmd := osexec.CommandContext(ctx, bin, "-stop-on-eof")
	stdin, out, err := startPiped(cmd)
	if err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("emulator did not start: %w", err)
	}
	var ready struct {
		APIURL string `json:"apiUrl"`
		APIKey string `json:"apiKey"`
	}
	if err := json.Unmarshal([]byte(line), &ready); err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	return &sim{cmd: cmd, stdin: stdin, apiURL: ready.APIURL, apiKey: ready.APIKey}, nil
}

// startPiped starts cmd with pipes to its stdin and from its stdout; its
// stderr is ours, so the child's logs show next to the demo's steps.
func startPiped(cmd *osexec.Cmd) (io.WriteCloser, io.ReadCloser, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s (run `make build` first): %w", cmd.Args[0], err)
	}
	return stdin, stdout, nil
}

func (s *sim) stop() {
	_ = s.stdin.Close() // it stops at stdin EOF (-stop-on-eof)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
	}
}

// worker is the worker process and a minimal JSON-RPC client of it.
type worker struct {
	cmd   *osexec.Cmd
	stdin io.WriteCloser
	out   io.Writer

	mu      sync.Mutex
	nextID  int
	pending map[int]chan response
	chunks  int
	exited  chan int
}

type response struct {
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// rpcError is a JSON-RPC error answer, with its data.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("error %d: %s", e.Code, e.Message) }

// cleanupSchema marks an error whose data is a failed creation's cleanup
// envelope: the host journals it and finishes the cleanup later.
const cleanupSchema = "paperclip/environment-creation-cleanup/v1"

// envelope is the cleanup envelope the error carries, or nil.
func (e *rpcError) envelope() map[string]any {
	var d struct {
		Schema  string         `json:"schema"`
		Cleanup map[string]any `json:"cleanup"`
	}
	if json.Unmarshal(e.Data, &d) != nil || d.Schema != cleanupSchema || d.Cleanup == nil {
		return nil
	}
	return d.Cleanup
}

func startWorker(ctx context.Context, bin string, out io.Writer) (*worker, error) {
	cmd := osexec.Command(bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "NODE_ENV=production", "TZ=UTC"}
	if key := os.Getenv("DAYTONA_API_KEY"); key != "" {
		cmd.Env = append(cmd.Env, "DAYTONA_API_KEY="+key)
	}
	stdin, stdout, err := startPiped(cmd)
	if err != nil {
		return nil, err
	}
	w := &worker{cmd: cmd, stdin: stdin, out: out, pending: map[int]chan response{}, exited: make(chan int, 1)}
	go w.read(stdout)
	return w, nil
}

func (w *worker) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var f struct {
				ID     *int            `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
				response
			}
			if json.Unmarshal(line, &f) == nil {
				switch {
				case f.Method == "execute.log":
					var p struct{ Stream, Chunk string }
					_ = json.Unmarshal(f.Params, &p)
					w.mu.Lock()
					w.chunks++
					w.mu.Unlock()
					for _, l := range strings.Split(strings.TrimRight(p.Chunk, "\n"), "\n") {
						fmt.Fprintf(w.out, "       | %s: %s\n", p.Stream, l)
					}
				case f.ID != nil && f.Method == "":
					w.mu.Lock()
					ch := w.pending[*f.ID]
					delete(w.pending, *f.ID)
					w.mu.Unlock()
					if ch != nil {
						ch <- f.response
					}
				}
			}
		}
		if err != nil {
			code := 0
			if werr := w.cmd.Wait(); werr != nil {
				var ee *osexec.ExitError
				if errors.As(werr, &ee) {
					code = ee.ExitCode()
				} else {
					code = -1
				}
			}
			w.exited <- code
			return
		}
	}
}

func (w *worker) logChunks() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.chunks
	w.chunks = 0
	return n
}

func (w *worker) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	w.mu.Lock()
	w.nextID++
	id := w.nextID
	ch := make(chan response, 1)
	w.pending[id] = ch
	w.mu.Unlock()
	frame := map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params,
		"paperclipInvocation": map[string]any{"id": fmt.Sprintf("00000000-0000-4000-8000-%012d", id), "scope": map[string]any{"companyId": "demo-company"}}}
	b, err := json.Marshal(frame)
	if err != nil {
		return nil, err
	}
	if _, err := w.stdin.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return nil, r.Error
		}
		return r.Result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: no answer: %w", method, ctx.Err())
	}
}

func (w *worker) wait(d time.Duration) int {
	select {
	case code := <-w.exited:
		return code
	case <-time.After(d):
		_ = w.cmd.Process.Kill()
		return -1
	}
}

func (w *worker) kill() {
	_ = w.stdin.Close()
	_ = w.cmd.Process.Kill()
}
