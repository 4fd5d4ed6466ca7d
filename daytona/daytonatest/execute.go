package daytonatest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
	if err == nil {
		cmd.Stdin = strings.NewReader(script)
		cmd.Stdout = &out
		cmd.Stderr = &out
		// A background process that keeps the output pipe open must not hold
		// the reply forever once the shell itself has exited.
		cmd.WaitDelay = 2 * time.Second
		sb.tb.mu.Lock()
		err = cmd.Start()
		if err == nil {
			sb.tb.execs[cmd] = struct{}{}
		}
		sb.tb.mu.Unlock()
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
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(time.Duration(req.Timeout) * time.Second)
		defer t.Stop()
		timeout = t.C
	}
	answered := false
	select {
	case err := <-done:
		code := exitCodeOf(err)
		if errors.Is(err, osexec.ErrWaitDelay) && cmd.ProcessState != nil {
			code = cmd.ProcessState.ExitCode()
		}
		parts, release := out.take()
		defer release()
		answered = true
		writeExecuteAnswer(c.w, code, parts)
	case <-timeout:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		writeToolboxError(c.w, c.r, http.StatusRequestTimeout, "command execution timeout")
	case <-c.s.done:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	if !answered {
		_, release := out.take() // the output goes unsent: its chunks back to the pool
		release()
	}
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
