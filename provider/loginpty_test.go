package provider

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/rpc"
)

func loginOutput(t *testing.T, log []frame, sid string) string {
	var sb strings.Builder
	for _, o := range routeNotes(t, log, rpc.LoginPtyOutputMethod, sid, func(o rpc.LoginPtyOutput) string { return o.WorkerSessionID }) {
		sb.WriteString(o.Chunk)
	}
	return sb.String()
}

func loginExits(t *testing.T, log []frame, sid string) []rpc.LoginPtyExit {
	return routeNotes(t, log, rpc.LoginPtyExitMethod, sid, func(x rpc.LoginPtyExit) string { return x.WorkerSessionID })
}

func sessionHome(t *testing.T) string {
	home := "/tmp/paperclip-adapter-login/" + uuid.NewString()
	t.Cleanup(func() { _ = os.RemoveAll(home) })
	return home
}

func (h *chanHost) openLogin(l lease, route, key, home string) string {
	h.t.Helper()
	f := h.call("loginPtyOpen", with(leaseBase(l), "hostRouteId", route, "loginCommandKey", key, "sessionHome", home))
	require.Nil(h.t, f.Error, "open failed: %+v", f.Error)
	var r rpc.LoginPtyOpenResult
	require.NoError(h.t, json.Unmarshal(f.Result, &r))
	require.True(h.t, strings.HasPrefix(r.WorkerSessionID, "pty-"), r.WorkerSessionID)
	return r.WorkerSessionID
}

// installFakeCLI puts an agent CLI named name on the sandbox user's login
// PATH: it prompts, then echoes each line it reads, as a login waiting for
// the pasted code does.
func installFakeCLI(t *testing.T, e *testEnv, l lease, name string) {
	t.Helper()
	script := `mkdir -p "$HOME/bin" && printf '#!/bin/sh\necho "paste the code:"\nwhile read -r l; do echo "got:$l"; done\n' >"$HOME/bin/` + name +
		`" && chmod +x "$HOME/bin/` + name + `" && echo 'PATH="$HOME/bin:$PATH"' >>"$HOME/.bash_profile"`
	raw, err := e.call("environmentExecute", with(e.base(l.Metadata), "lease", l, "command", "sh", "args", []string{"-c", script}))
	require.NoError(t, err)
	code := decode[execResult](t, raw).ExitCode
	require.NotNil(t, code)
	require.Equal(t, 0, *code, "installing a fake %s", name)
}

// A login terminal runs the fixed Claude line on a real terminal; what the
// user types reaches it, its output comes back as text after the open's
// reply, and the close (keyed by the host route id) is acknowledged.
func TestLoginPtyTypeReadClose(t *testing.T) {
	e, l, _ := leased(t, nil)
	installFakeCLI(t, e, l, "claude")
	h := newChanHost(t, e)
	route := uuid.NewString()
	sid := h.openLogin(l, route, "claude", sessionHome(t))
	h.until("prompt", func(log []frame) bool { return strings.Contains(loginOutput(t, log, sid), "paste the code:") })
	f := h.call("loginPtyInput", map[string]any{"workerSessionId": sid, "data": "code-42-é\r"})
	require.Nil(t, f.Error)
	log := h.until("typed output", func(log []frame) bool { return strings.Contains(loginOutput(t, log, sid), "got:code-42-é") })
	for i, fr := range log {
		if fr.Method == rpc.LoginPtyOutputMethod {
			require.Equal(t, json.RawMessage(`1`), log[0].ID, "the open's reply comes first")
			require.Less(t, 0, i)
			break
		}
	}
	require.Contains(t, loginOutput(t, log, sid), "exec claude setup-token")
	f = h.call("loginPtyClose", map[string]any{"hostRouteId": route})
	require.JSONEq(t, `{"hostRouteId":"`+route+`"}`, string(f.Result))
	f = h.call("loginPtyClose", map[string]any{"hostRouteId": route})
	require.JSONEq(t, `{"hostRouteId":"`+route+`"}`, string(f.Result), "close is idempotent")
	require.Empty(t, e.srv.PTYs(*l.ProviderLeaseID))
	// Input and stop for a session that is gone are no-ops.
	require.JSONEq(t, "null", string(h.call("loginPtyInput", map[string]any{"workerSessionId": sid, "data": "x"}).Result))
	require.JSONEq(t, "null", string(h.call("loginPtyStop", map[string]any{"workerSessionId": "pty-unknown"}).Result))
}

// The Codex line carries the session home as its one quoted assignment;
// the home is created first, and the command's exit is reported once.
func TestLoginPtyCodexCreatesHomeAndReportsExit(t *testing.T) {
	e, l, _ := leased(t, nil)
	h := newChanHost(t, e)
	home := sessionHome(t)
	sid := h.openLogin(l, uuid.NewString(), "codex", home)
	st, err := os.Stat(e.hostPath(l, home))
	require.NoError(t, err)
	require.True(t, st.IsDir())
	log := h.until("exit", func(log []frame) bool { return len(loginExits(t, log, sid)) > 0 })
	require.Contains(t, loginOutput(t, log, sid), "exec env CODEX_HOME='"+home+"' codex login --device-auth")
	x := loginExits(t, log, sid)
	require.Len(t, x, 1)
	require.NotNil(t, x[0].ExitCode)
	require.Equal(t, 127, *x[0].ExitCode, "env found no codex")
	// An existing home is fine.
	h.openLogin(l, uuid.NewString(), "codex", home)
}

// A login for an agent CLI the sandbox does not have ends: the terminal
// shows the shell's message and exits 127, instead of leaving a shell open
// behind the login dialog. Grok's line carries its home like Codex's.
func TestLoginPtyMissingCLIExits127(t *testing.T) {
	e, l, _ := leased(t, nil)
	h := newChanHost(t, e)
	for _, key := range []string{"claude", "grok"} {
		home := sessionHome(t)
		sid := h.openLogin(l, uuid.NewString(), key, home)
		log := h.until(key+" exit", func(log []frame) bool { return len(loginExits(t, log, sid)) > 0 })
		x := loginExits(t, log, sid)
		require.Len(t, x, 1, key)
		require.NotNil(t, x[0].ExitCode, key)
		require.Equal(t, 127, *x[0].ExitCode, key)
		out := loginOutput(t, log, sid)
		// bash's "exec: claude: not found", or env's "‘grok’: No such file
		// or directory".
		require.Regexp(t, key+`.*(not found|No such file or directory)`, out, "%s: the shell's message reaches the terminal", key)
		if key == "grok" {
			require.Contains(t, out, "exec env GROK_HOME='"+home+"' grok login --device-auth")
		}
	}
	require.Empty(t, e.srv.PTYs(*l.ProviderLeaseID), "no terminal is left in the sandbox")
}

// A descriptor outside the contract is rejected before anything runs.
func TestLoginPtyDescriptorRejected(t *testing.T) {
	e, l, id := leased(t, nil)
	h := newChanHost(t, e)
	good := "/tmp/paperclip-adapter-login/" + uuid.NewString()
	before := len(e.srv.Requests())
	cases := []struct{ key, home string }{
		{"gemini", good}, {"", good}, {"Claude", good}, {"claude; rm -rf /", good},
		{"claude", strings.ToUpper(good)}, {"claude", good + "/"}, {"claude", good + "\n"},
		{"claude", "/tmp/paperclip-adapter-login/../etc"}, {"codex", "tmp/paperclip-adapter-login/" + uuid.NewString()},
		{"codex", "/tmp/paperclip-adapter-login/" + uuid.NewString() + "' x"}, {"codex", ""},
	}
	for _, c := range cases {
		f := h.call("loginPtyOpen", with(leaseBase(l), "hostRouteId", uuid.NewString(), "loginCommandKey", c.key, "sessionHome", c.home))
		require.NotNil(t, f.Error, "%q %q", c.key, c.home)
		require.Equal(t, "LOGIN_PTY_DESCRIPTOR_REJECTED", f.Error.Message)
	}
	require.Len(t, e.srv.Requests(), before, "nothing reached Daytona")
	require.Empty(t, e.srv.PTYs(id))
	f := h.call("loginPtyClose", map[string]any{"hostRouteId": "never-opened"})
	require.JSONEq(t, `{"hostRouteId":"never-opened"}`, string(f.Result))
}

// shutdown (the host sends it on every config save) ends every open
// channel before it is answered: the host gets each route's exit, and no
// terminal is left running in the sandbox.
func TestShutdownEndsOpenChannels(t *testing.T) {
	e, l, id := leased(t, nil)
	installFakeCLI(t, e, l, "claude")
	h := newChanHost(t, e, rpc.Options{OnShutdown: e.d.CloseChannels})
	sid := h.openLogin(l, uuid.NewString(), "claude", sessionHome(t))
	h.until("prompt", func(log []frame) bool { return strings.Contains(loginOutput(t, log, sid), "paste the code:") })
	r := h.openDuplex(l, "duplex-shutdown", "cat")
	require.Len(t, e.srv.PTYs(id), 2)

	f := h.call("shutdown", nil)
	require.Nil(t, f.Error)
	h.mu.Lock()
	log := append([]frame(nil), h.log...)
	h.mu.Unlock()
	reply := -1
	for i, fr := range log {
		if fr.Method == "" && string(fr.ID) == string(f.ID) {
			reply = i
		}
	}
	require.GreaterOrEqual(t, reply, 0)
	require.Len(t, loginExits(t, log[:reply], sid), 1, "the login exit precedes the shutdown answer")
	require.Len(t, exits(t, log[:reply], r.WorkerSessionID), 1, "the duplex exit precedes the shutdown answer")
	require.Empty(t, e.srv.PTYs(id), "no terminal is left in the sandbox")
}
