package daytonatest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// fsizeBlocks is the `ulimit -f` value (1024-byte blocks) matching the
// sandbox's remaining disk allocation.
func (sb *sandbox) fsizeBlocks() int64 {
	rem := sb.diskRemaining()
	if rem < 0 {
		rem = 0
	}
	return rem / 1024
}

func tbExecute(c *call) {
	var req struct {
		Command string            `json:"command"`
		Cwd     string            `json:"cwd"`
		Envs    map[string]string `json:"envs"`
		Timeout int               `json:"timeout"`
	}
	if err := json.NewDecoder(c.r.Body).Decode(&req); err != nil || strings.TrimSpace(req.Command) == "" {
		writeToolboxError(c.w, c.r, http.StatusBadRequest, "invalid request body")
		return
	}
	for k := range req.Envs {
		if !envKeyRE.MatchString(k) {
			writeToolboxError(c.w, c.r, http.StatusBadRequest, "invalid environment variable name: "+k)
			return
		}
	}
	sb := c.sb
	dir := sb.home
	if req.Cwd != "" {
		dir = req.Cwd
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(sb.home, dir)
		}
	}
	script := fmt.Sprintf("ulimit -S -f %d 2>/dev/null; trap '' XFSZ\n%s\n", sb.fsizeBlocks(), req.Command)
	cmd, err := sb.command([]string{bashBinary()}, dir, sb.baseEnv(req.Envs), false)
	var out outputBuffer
	// The output is one pipe the emulator reads to its end, as the
	// daemon's exec.Cmd does: the answer waits for every process that
	// still holds it (a background job), until the timeout kills the
	// group (docs/emulator.md#one-shot-background-jobs).
	var outR, outW *os.File
	if err == nil {
		outR, outW, err = os.Pipe()
	}
	if err == nil {
		cmd.Stdin = strings.NewReader(script)
		cmd.Stdout = outW
		cmd.Stderr = outW
		sb.tb.mu.Lock()
		err = cmd.Start()
		if err == nil {
			sb.tb.execs[cmd] = struct{}{}
		}
		sb.tb.mu.Unlock()
		_ = outW.Close()
		if err != nil {
			_ = outR.Close()
		}
	}
	if err != nil {
		writeJSON(c.w, http.StatusOK, map[string]any{"exitCode": -1, "result": err.Error()})
		return
	}
	c.s.recordDispatch(Dispatch{Sandbox: sb.id, Command: req.Command, Timeout: req.Timeout})
	defer func() {
		sb.tb.mu.Lock()
		delete(sb.tb.execs, cmd)
		sb.tb.mu.Unlock()
	}()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = out.ReadFrom(outR)
	}()
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		<-copied
		done <- err
	}()
	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(time.Duration(req.Timeout) * time.Second)
		defer t.Stop()
		timeout = t.C
	}
	// kill ends the group; a process that left it (setsid) may still hold
	// the pipe, so the read end is closed too.
	kill := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = outR.Close()
		<-done
	}
	answered := false
	select {
	case err := <-done:
		_ = outR.Close()
		parts, release := out.take()
		defer release()
		answered = true
		writeExecuteAnswer(c.w, oneShotExitCode(err), parts)
	case <-timeout:
		kill()
		writeToolboxError(c.w, c.r, http.StatusRequestTimeout, "command execution timeout")
	case <-c.s.done:
		kill()
	}
	if !answered {
		_, release := out.take() // the output goes unsent: its chunks back to the pool
		release()
	}
}

// oneShotExitCode is the daemon's exit code of a one-shot command: the
// shell's status, or -1 when the shell itself was killed by a signal (its
// wait reports an error, not a status).
func oneShotExitCode(err error) int {
	var ee *osexec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1
		}
	}
	return exitCodeOf(err)
}

func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	var ee *osexec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}
