package channel

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/shell"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// The login terminal: an agent's login command (claude setup-token, codex
// and grok device login) on a real terminal in the sandbox, driven by the host's
// browser flow. The command is chosen from a closed set of keys; nothing
// the host sends is ever run as a command, and the code the user pastes
// travels as terminal input, never as an argument.

// MaxLoginTotalChars is the host's limit of what one login route carries,
// in JavaScript characters.
const MaxLoginTotalChars = 8 << 20

// loginRejected is the one error of a descriptor outside the contract.
const loginRejected = "LOGIN_PTY_DESCRIPTOR_REJECTED"

// sessionHomeRE is the exact session home shape: the fixed root and one
// lower-case UUID, nothing else (no traversal, space or metacharacter).
var sessionHomeRE = regexp.MustCompile(`^/tmp/paperclip-adapter-login/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// loginLaunch is the fixed launch line of a login command key: the
// first-party plugin's, which replaces the terminal's shell with the
// command, so the command's exit is the terminal's. When the shell cannot
// exec the command (an agent CLI not installed in the sandbox), an
// interactive shell prints why and stays, which would leave a shell open
// behind the login dialog: "|| exit $?" ends the terminal with the shell's
// status instead (127 for a command not found, 126 for one not
// executable). After a successful exec nothing of the line is left to run.
func loginLaunch(key, home string) (string, bool) {
	const orExit = " || exit $?"
	switch key {
	case "claude":
		return "exec claude setup-token" + orExit, true
	case "codex":
		return "exec env CODEX_HOME=" + shell.Quote(home) + " codex login --device-auth" + orExit, true
	case "grok":
		return "exec env GROK_HOME=" + shell.Quote(home) + " grok login --device-auth" + orExit, true
	}
	return "", false
}

// loginHomeScript creates the session home with one command, after the
// login profiles (an existing home is fine).
func loginHomeScript(home string) string {
	return `for f in /etc/profile "$HOME/.profile" "$HOME/.bash_profile"; do [ -r "$f" ] && . "$f" >/dev/null 2>&1; done; mkdir -p ` + shell.Quote(home)
}

func (h *Hub) loginOpen(ctx context.Context, p rpc.LoginPtyOpenParams) (rpc.LoginPtyOpenResult, error) {
	line, ok := loginLaunch(p.LoginCommandKey, p.SessionHome)
	if !ok || !sessionHomeRE.MatchString(p.SessionHome) {
		return rpc.LoginPtyOpenResult{}, rpc.Errorf(rpc.CodeInvalidParams, loginRejected)
	}
	if strings.TrimSpace(p.HostRouteID) == "" {
		return rpc.LoginPtyOpenResult{}, rpc.InvalidParams("invalid params: hostRouteId is required")
	}
	la, err := h.resolve(Ref{p.DriverKey, p.CompanyID, p.EnvironmentID, p.ProviderLeaseID}, "login pseudo-terminal")
	if err != nil {
		return rpc.LoginPtyOpenResult{}, err
	}
	ch := &channel{h: h, la: la, hostRouteID: p.HostRouteID, sid: "pty-" + uuid.NewString(), n: rpc.NotifierFrom(ctx)}
	if ch.n == nil {
		return rpc.LoginPtyOpenResult{}, rpc.ErrNotServing
	}
	dec := &textStream{}
	ch.out = func(b []byte) bool {
		text := dec.decode(b)
		if text == "" {
			return true
		}
		if !dec.charge(text) {
			return false
		}
		ch.notify(rpc.LoginPtyOutputMethod, rpc.LoginPtyOutput{HostRouteID: ch.hostRouteID, WorkerSessionID: ch.sid, Chunk: text})
		return true
	}
	ch.exit = func(code *int, _ bool) {
		if rest := dec.flush(); rest != "" && dec.charge(rest) {
			ch.notify(rpc.LoginPtyOutputMethod, rpc.LoginPtyOutput{HostRouteID: ch.hostRouteID, WorkerSessionID: ch.sid, Chunk: rest})
		}
		ch.notify(rpc.LoginPtyExitMethod, rpc.LoginPtyExit{HostRouteID: ch.hostRouteID, WorkerSessionID: ch.sid, ExitCode: code})
	}
	if err := h.register(true, ch); err != nil {
		return rpc.LoginPtyOpenResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, openBound)
	defer cancel()
	err = func() error {
		if err := runHomeScript(ctx, la, loginHomeScript(p.SessionHome)); err != nil {
			return err
		}
		if err := ch.openTerm(ctx); err != nil {
			return err
		}
		if _, err := ch.conn.WriteContext(ctx, []byte(line+"\r")); err != nil {
			return err
		}
		return ch.bindAfterReply(ctx, "login pseudo-terminal", 0)
	}()
	if err != nil {
		h.unregister(true, ch, false)
		ch.end(context.Background())
		return rpc.LoginPtyOpenResult{}, err
	}
	return rpc.LoginPtyOpenResult{WorkerSessionID: ch.sid}, nil
}

func (h *Hub) loginInput(_ context.Context, p rpc.LoginPtyInputParams) (rpc.Continuation, error) {
	ch := h.find(true, p.WorkerSessionID)
	if ch == nil || p.WorkerSessionID == "" {
		return nil, nil
	}
	return ch.enqueue([]byte(p.Data))
}

func (h *Hub) loginStop(_ context.Context, p rpc.LoginPtyStopParams) (any, error) {
	if ch := h.find(true, p.WorkerSessionID); ch != nil && p.WorkerSessionID != "" {
		ch.kill()
	}
	return nil, nil
}

func (h *Hub) loginClose(_ context.Context, p rpc.ChannelCloseParams) (rpc.LoginPtyCloseResult, error) {
	h.closeRoute(true, p.HostRouteID)
	return rpc.LoginPtyCloseResult{HostRouteID: p.HostRouteID}, nil
}

// textStream decodes terminal output as UTF-8 across reads: a character
// split between two reads is held back until it is whole, an invalid byte
// becomes U+FFFD. It counts the characters sent against the route's total.
type textStream struct {
	mu    sync.Mutex
	held  []byte
	chars int
}

func (t *textStream) decode(b []byte) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	buf := append(t.held, b...)
	cut := len(buf)
	// An incomplete sequence at the end waits for the next read.
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	t.held = append([]byte(nil), buf[cut:]...)
	return validText(buf[:cut])
}

func (t *textStream) flush() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := validText(t.held)
	t.held = nil
	return s
}

// charge counts text against the route's total; false once it is spent.
func (t *textStream) charge(s string) bool {
	n := 0
	for _, r := range s {
		n += max(1, utf16.RuneLen(r))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.chars+n > MaxLoginTotalChars {
		return false
	}
	t.chars += n
	return true
}

// validText replaces each invalid byte with U+FFFD.
func validText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		sb.WriteRune(r)
		b = b[n:]
	}
	return sb.String()
}

// runHomeScript runs the session home script with the one-shot execute
// API; a non-zero exit fails the open.
func runHomeScript(ctx context.Context, la *Lease, script string) error {
	res, _, err := la.Client.Toolbox.Execute(ctx, la.Sandbox.Ref(), &daytona.ExecuteRequest{Command: script, Timeout: int(openBound.Seconds())})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
		return fmt.Errorf("Daytona login pseudo-terminal: creating the session home failed with exit code %d", res.ExitCode)
	}
	return nil
}
