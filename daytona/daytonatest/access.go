package daytonatest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// PreviewDomain is the proxy domain of the emulator's preview URLs,
// https://{port}-{sandboxId}.PreviewDomain, the shape Daytona gives them.
// A reserved test domain: nothing resolves it, and the emulator does not
// proxy previews; it mints the URLs and tokens a provider hands on.
const PreviewDomain = "proxy.daytonatest.test"

// SSHHost is the host of the emulator's SSH access commands
// (ssh <token>@SSHHost, as Daytona's ssh.app.daytona.io). The emulator
// serves no SSH.
const SSHHost = "ssh.daytonatest.test"

// defaultSSHMinutes is Daytona's default SSH access lifetime.
const defaultSSHMinutes = 60

// sshAccess is one SSH access token of a sandbox.
type sshAccess struct {
	id, sandboxID, token string
	createdAt, expiresAt time.Time
}

// SSHAccessInfo is what a test sees of a live SSH access token.
type SSHAccessInfo struct {
	ID, SandboxID, Token string
	ExpiresAt            time.Time
}

// accessState holds the emulator's SSH access tokens and snapshots
// (guarded by Server.mu).
type accessState struct {
	ssh       []*sshAccess
	snapshots map[string]*snapshot // by id
	deleted   map[string]bool      // snapshot names deleted
}

// apiCreateSSHAccess is POST /sandbox/{sandboxIdOrName}/ssh-access.
func apiCreateSSHAccess(c *call) {
	if !c.needSandbox() {
		return
	}
	minutes := defaultSSHMinutes
	if v := c.r.URL.Query().Get("expiresInMinutes"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f != float64(int(f)) {
			c.apiErr(http.StatusBadRequest, "expiresInMinutes must be a positive whole number")
			return
		}
		minutes = int(f)
	}
	now := time.Now()
	a := &sshAccess{id: uuid.NewString(), sandboxID: c.sb.id, token: randHex(24),
		createdAt: now, expiresAt: now.Add(time.Duration(minutes) * time.Minute)}
	c.s.mu.Lock()
	c.s.access.ssh = append(c.s.access.ssh, a)
	c.s.mu.Unlock()
	writeJSON(c.w, http.StatusOK, map[string]string{
		"id": a.id, "sandboxId": a.sandboxID, "token": a.token,
		"expiresAt": isoTime(a.expiresAt), "createdAt": isoTime(a.createdAt), "updatedAt": isoTime(a.createdAt),
		"sshCommand": fmt.Sprintf("ssh %s@%s", a.token, SSHHost),
	})
}

// apiRevokeSSHAccess is DELETE /sandbox/{sandboxIdOrName}/ssh-access: one
// token (?token=) or all of the sandbox's.
func apiRevokeSSHAccess(c *call) {
	if !c.needSandbox() {
		return
	}
	token := c.r.URL.Query().Get("token")
	c.s.mu.Lock()
	kept := c.s.access.ssh[:0]
	for _, a := range c.s.access.ssh {
		if a.sandboxID != c.sb.id || (token != "" && a.token != token) {
			kept = append(kept, a)
		}
	}
	c.s.access.ssh = kept
	c.s.mu.Unlock()
	c.reply(http.StatusOK)
}

// SSHAccess returns the sandbox's unexpired SSH access tokens.
func (s *Server) SSHAccess(idOrName string) []SSHAccessInfo {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SSHAccessInfo
	sb := s.lookupLocked(idOrName)
	now := time.Now()
	for _, a := range s.access.ssh {
		if sb != nil && a.sandboxID == sb.id && now.Before(a.expiresAt) {
			out = append(out, SSHAccessInfo{ID: a.id, SandboxID: a.sandboxID, Token: a.token, ExpiresAt: a.expiresAt})
		}
	}
	return out
}

// RotatePreviewToken gives the sandbox a new preview token (the old one
// stops authenticating) without any lifecycle change, and returns it.
func (s *Server) RotatePreviewToken(idOrName string) (string, error) {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookupLocked(idOrName)
	if sb == nil {
		return "", fmt.Errorf("daytonatest: no sandbox %q", idOrName)
	}
	sb.previewToken = randHex(12)
	s.notifyLocked()
	return sb.previewToken, nil
}

// previewURL is the preview URL of a sandbox port.
func previewURL(port int, sandboxID string) string {
	return fmt.Sprintf("https://%d-%s.%s", port, strings.ToLower(sandboxID), PreviewDomain)
}
