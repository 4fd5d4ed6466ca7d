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
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/internal/cli"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

// The test binary re-executes itself as the worker (the process tier of the
// tests):
// with this variable set, TestMain serves stdio like the real binary, plus a
// few test-only methods the product never registers.
const runAsWorker = "_DAYTONA_WORKER_TEST_RUN_AS_WORKER"

func TestMain(m *testing.M) {
	switch os.Getenv(runAsWorker) {
	case "serve":
		level, err := logLevel(os.Getenv(logLevelEnv))
		if err == nil {
			err = serve(context.Background(), os.Stdin, os.Stdout, os.Stderr, serveOptions{watchParent: true, register: testMethods, level: level})
		}
		os.Exit(cli.ExitCode(err))
	case "parent":
		// A stand-in launcher: start the worker with our stdin, print its
		// pid, then wait to be killed.
		cmd := osexec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), runAsWorker+"=serve", fmt.Sprintf("%s=%d", parentPIDEnv, os.Getpid()))
		cmd.Stdin = os.Stdin
		cmd.Stdout = io.Discard
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			os.Exit(3)
		}
		fmt.Println(cmd.Process.Pid)
		_ = cmd.Wait()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testMethods are registered only in the re-executed test worker.
func testMethods(reg *rpc.Registry) {
	var mu sync.Mutex
	gates := map[string]chan struct{}{}
	gate := func(key string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if gates[key] == nil {
			gates[key] = make(chan struct{})
		}
		return gates[key]
	}
	type keyed struct {
		Key string `json:"key"`
	}
	reg.Register("test.block", rpc.Typed(func(ctx context.Context, p keyed) (string, error) {
		select {
		case <-gate(p.Key):
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}))
	reg.Register("test.release", rpc.Typed(func(_ context.Context, p keyed) (any, error) {
		close(gate(p.Key))
		return nil, nil
	}))
	reg.Register("test.panic", func(context.Context, json.RawMessage) (any, error) { panic("test panic") })
	loadMethods(reg)
	reg.Register("test.typed", rpc.Typed(func(_ context.Context, p struct {
		TimeoutMs int `json:"timeoutMs"`
	}) (any, error) {
		return p, nil
	}))
}

// workerProc is the worker under test as a separate process.
type workerProc struct {
	t      *testing.T
	cmd    *osexec.Cmd
	stdin  io.WriteCloser
	frames chan []byte
	raw    chan error    // non-frame output
	eof    chan struct{} // closed when stdout reached EOF
	stderr *lockedBuilder
}

func startWorker(t *testing.T) *workerProc {
	t.Helper()
	cmd := osexec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runAsWorker+"=serve")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &lockedBuilder{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	w := &workerProc{t: t, cmd: cmd, stdin: stdin, frames: make(chan []byte, 256), raw: make(chan error, 16), eof: make(chan struct{}), stderr: stderr}
	go func() {
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				if !isFrame(line) {
					w.raw <- fmt.Errorf("stdout line is not a JSON-RPC frame: %q", line)
				}
				w.frames <- line
			}
			if err != nil {
				close(w.frames)
				close(w.eof)
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.eof // Wait closes stdout: only after the reader is done
		_ = cmd.Wait()
	})
	return w
}

type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// isFrame: one JSON object, "jsonrpc":"2.0", terminated by exactly one "\n".
func isFrame(line []byte) bool {
	if len(line) < 2 || line[len(line)-1] != '\n' || line[len(line)-2] == '\r' {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return false
	}
	return string(m["jsonrpc"]) == `"2.0"`
}

func (w *workerProc) send(b []byte) {
	w.t.Helper()
	_, err := w.stdin.Write(b)
	require.NoError(w.t, err)
}

func (w *workerProc) recv() map[string]any {
	w.t.Helper()
	select {
	case err := <-w.raw:
		w.t.Fatal(err)
	case line, ok := <-w.frames:
		require.True(w.t, ok, "worker closed stdout; stderr:\n%s", w.stderr.String())
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(string(line)))
		d.UseNumber()
		require.NoError(w.t, d.Decode(&m))
		return m
	case <-time.After(20 * time.Second):
		w.t.Fatalf("no frame from the worker in 20s; stderr:\n%s", w.stderr.String())
	}
	return nil
}

// waitExit waits for the process to exit by itself and returns its code.
func (w *workerProc) waitExit() int {
	w.t.Helper()
	done := make(chan error, 1)
	go func() {
		<-w.eof // Wait closes stdout: only after the reader is done
		done <- w.cmd.Wait()
	}()
	select {
	case err := <-done:
		var ee *osexec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		require.NoError(w.t, err)
		return 0
	case <-time.After(20 * time.Second):
		w.t.Fatal("worker did not exit")
		return -1
	}
}

func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("../../testdata/transcripts/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			t.Parallel()
			replay(t, f)
		})
	}
}

// replay runs one transcript. Lines:
//
//	> FRAME        send FRAME + "\n" (sent as-is, may be malformed)
//	>crlf FRAME    send FRAME + "\r\n"
//	>big MIB ID    send a health request of MIB MiB with id ID
//	< PATTERN      expect a frame; consecutive "<" lines match in any order
//	!exit CODE     expect the worker to exit by itself with CODE
//
// At the end stdin is closed and the worker must exit 0 with nothing more on
// stdout. Patterns are JSON; "<any>" matches any value, "<any?>" also an absent
// key, "<contains:S>" a string containing S; objects match key for key.
func replay(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	w := startWorker(t)
	var expect []string
	flush := func() {
		if len(expect) == 0 {
			return
		}
		pending := expect
		expect = nil
		for range len(pending) {
			got := w.recv()
			matched := -1
			for i, p := range pending {
				if matchPattern(t, p, got) == nil {
					matched = i
					break
				}
			}
			if matched < 0 {
				gotJSON, _ := json.Marshal(got)
				var why []string
				for _, p := range pending {
					why = append(why, matchPattern(t, p, got).Error())
				}
				t.Fatalf("%s: unexpected frame %s\nmismatches: %s", file, gotJSON, strings.Join(why, "; "))
			}
			pending = append(pending[:matched], pending[matched+1:]...)
		}
	}
	exited := false
	for n, line := range strings.Split(string(data), "\n") {
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "< "):
			expect = append(expect, line[2:])
		case strings.HasPrefix(line, ">crlf "):
			flush()
			w.send([]byte(line[6:] + "\r\n"))
		case strings.HasPrefix(line, ">big "):
			flush()
			var mib, id int
			_, err := fmt.Sscanf(line, ">big %d %d", &mib, &id)
			require.NoError(t, err)
			head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"health","params":{"pad":"`, id)
			w.send([]byte(head))
			chunk := []byte(strings.Repeat("x", 1<<20))
			for range mib {
				w.send(chunk)
			}
			w.send([]byte("\"}}\n"))
		case line == ">" || strings.HasPrefix(line, "> "):
			flush()
			w.send([]byte(strings.TrimPrefix(strings.TrimPrefix(line, ">"), " ") + "\n"))
		case strings.HasPrefix(line, "!exit "):
			flush()
			code, err := strconv.Atoi(line[6:])
			require.NoError(t, err)
			require.Equal(t, code, w.waitExit(), "exit code")
			exited = true
		default:
			t.Fatalf("%s:%d: bad transcript line %q", file, n+1, line)
		}
	}
	flush()
	if !exited {
		require.NoError(t, w.stdin.Close())
		require.Equal(t, 0, w.waitExit(), "exit code after stdin EOF")
	}
	for line := range w.frames {
		t.Fatalf("unexpected frame after the transcript: %s", line)
	}
	select {
	case err := <-w.raw:
		t.Fatal(err)
	default:
	}
}

func matchPattern(t *testing.T, pattern string, got any) error {
	var p any
	d := json.NewDecoder(strings.NewReader(pattern))
	d.UseNumber()
	require.NoError(t, d.Decode(&p), "bad pattern %q", pattern)
	return match("$", p, got)
}

func match(path string, p, got any) error {
	switch pv := p.(type) {
	case string:
		switch {
		case pv == "<any>" || pv == "<any?>":
			return nil
		case strings.HasPrefix(pv, "<contains:") && strings.HasSuffix(pv, ">"):
			s, ok := got.(string)
			if !ok || !strings.Contains(s, pv[10:len(pv)-1]) {
				return fmt.Errorf("%s: %v does not contain %q", path, got, pv[10:len(pv)-1])
			}
			return nil
		}
	case map[string]any:
		gm, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %v", path, got)
		}
		for k, v := range pv {
			gv, present := gm[k]
			if !present {
				if v == "<any?>" {
					continue
				}
				return fmt.Errorf("%s.%s: missing", path, k)
			}
			if err := match(path+"."+k, v, gv); err != nil {
				return err
			}
		}
		for k := range gm {
			if _, ok := pv[k]; !ok {
				return fmt.Errorf("%s.%s: unexpected key", path, k)
			}
		}
		return nil
	case []any:
		ga, ok := got.([]any)
		if !ok || len(ga) != len(pv) {
			return fmt.Errorf("%s: want %d elements, got %v", path, len(pv), got)
		}
		for i := range pv {
			if err := match(fmt.Sprintf("%s[%d]", path, i), pv[i], ga[i]); err != nil {
				return err
			}
		}
		return nil
	}
	pj, _ := json.Marshal(p)
	gj, _ := json.Marshal(got)
	if string(pj) != string(gj) {
		return fmt.Errorf("%s: want %s, got %s", path, pj, gj)
	}
	// Same text but different JSON type (1 vs "1") marshals differently, so
	// equal text is equal type.
	return nil
}

// TestStdoutCarriesOnlyFrames drives the worker process through good, bad and
// concurrent traffic and checks every stdout line (isFrame runs on each).
func TestStdoutCarriesOnlyFrames(t *testing.T) {
	w := startWorker(t)
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`garbage`, `{}`, `[]`, `{"jsonrpc":"2.0","id":2,"method":"test.panic"}`,
		`{"jsonrpc":"2.0","id":3,"method":"health"}`,
		`{"jsonrpc":"2.0","id":4,"method":"test.typed","params":{"timeoutMs":[]}}`,
	}
	for _, l := range lines {
		w.send([]byte(l + "\n"))
	}
	for range 6 { // everything but the notification-less "{}"... all get an answer
		w.recv()
	}
	require.NoError(t, w.stdin.Close())
	require.Equal(t, 0, w.waitExit())
	for range w.frames {
	}
	select {
	case err := <-w.raw:
		t.Fatal(err)
	default:
	}
}

// TestExitsWhenParentDies kills a stand-in launcher with SIGKILL while the
// worker's stdin stays open: the worker must notice its new parent and exit.
func TestExitsWhenParentDies(t *testing.T) {
	stdinR, stdinW, err := os.Pipe()
	require.NoError(t, err)
	defer stdinW.Close()
	parent := osexec.Command(os.Args[0])
	parent.Env = append(os.Environ(), runAsWorker+"=parent")
	parent.Stdin = stdinR
	out, err := parent.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, parent.Start())
	stdinR.Close()
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	require.NoError(t, parent.Process.Kill())
	_ = parent.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("worker kept running after its parent died: %s", st)
		}
		time.Sleep(10 * time.Millisecond) // polling for the exit, not synchronising
	}
}

// alive reports whether pid runs; a zombie (no reaper in some sandboxes)
// counts as exited.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
