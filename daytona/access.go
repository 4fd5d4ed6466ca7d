package daytona

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
)

// SSH access routes (docs/daytona.md#sandboxes, "other sandbox endpoints").
var (
	rCreateSSHAccess = newRoute(route{name: "createSshAccess", method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/ssh-access", retry: retryRateLimited,
		query:      []string{"expiresInMinutes"},
		respSchema: "SshAccessDto", resp: SSHAccess{}})
	rRevokeSSHAccess = newRoute(route{name: "revokeSshAccess", method: "DELETE", tmpl: "/sandbox/{sandboxIdOrName}/ssh-access", retry: retryIdempotent,
		query:      []string{"token"},
		respSchema: "Sandbox", resp: Sandbox{}})
)

// SSHAccess is an SSH access token for a sandbox (SshAccessDto). Token and
// SSHCommand (which embeds the token) are secrets: never log them.
type SSHAccess struct {
	ID         string `json:"id"`
	SandboxID  string `json:"sandboxId"`
	Token      string `json:"token"`
	ExpiresAt  string `json:"expiresAt"`
	CreatedAt  string `json:"createdAt"`
	UpdatedAt  string `json:"updatedAt"`
	SSHCommand string `json:"sshCommand"`
}

// CreateSSHAccess mints an SSH access token valid for expiresInMinutes
// (0 = the server default, 60). The token and the SSH command are
// remembered and redacted from every later error of this client.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/POST/sandbox/{sandboxIdOrName}/ssh-access
func (s *SandboxesService) CreateSSHAccess(ctx context.Context, idOrName string, expiresInMinutes int) (*SSHAccess, *Response, error) {
	if expiresInMinutes < 0 {
		return nil, nil, fmt.Errorf("%w: expiresInMinutes must be non-negative", ErrInvalidArgument)
	}
	var q url.Values
	if expiresInMinutes > 0 {
		q = url.Values{"expiresInMinutes": {strconv.Itoa(expiresInMinutes)}}
	}
	out := new(SSHAccess)
	r, err := s.client.do(ctx, &call{rt: rCreateSSHAccess, args: []string{idOrName}, query: q}, out)
	if err != nil {
		return nil, r, err
	}
	s.client.rememberSecret(out.Token)
	s.client.rememberSecret(out.SSHCommand)
	return out, r, nil
}

// RevokeSSHAccess revokes one SSH access token, or every one of the
// sandbox when token is "".
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona/tag/sandbox/DELETE/sandbox/{sandboxIdOrName}/ssh-access
func (s *SandboxesService) RevokeSSHAccess(ctx context.Context, idOrName, token string) (*Response, error) {
	var q url.Values
	if token != "" {
		q = url.Values{"token": {token}}
	}
	return s.client.do(ctx, &call{rt: rRevokeSSHAccess, args: []string{idOrName}, query: q}, nil)
}
