package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// The runner ingress (environmentRunnerIngressEndpoint): the runner daemon
// inside a sandbox listens on one fixed port, and the host reaches it over
// a private Daytona preview URL turned into an authenticated WebSocket.

// RunnerIngressPort is the one port the runner ingress may use.
const RunnerIngressPort = 43127

// previewTokenHeader carries a private preview URL's token. The token goes
// only there, never into the URL.
const previewTokenHeader = "X-Daytona-Preview-Token"

// ingressPath is the runner's connect path: one segment after the prefix.
// Besides the rule that the segment holds no '/', '?' or '#', it admits
// only characters a URL path carries as they are (RFC 3986 pchar, with
// %XX escapes), so the URL the host receives has exactly the path it asked
// for, and "." or ".." never name another path.
var ingressPath = regexp.MustCompile(`^/api/runner/v1/connect/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+$`)

func (d *Driver) runnerIngress(ctx context.Context, p rpc.IngressParams) (*rpc.IngressEndpoint, error) {
	if p.Port != RunnerIngressPort {
		return nil, rpc.InvalidParams("Daytona runner ingress must use fixed port 43127.")
	}
	segment := strings.TrimPrefix(p.Path, "/api/runner/v1/connect/")
	if !ingressPath.MatchString(p.Path) || segment == "." || segment == ".." {
		return nil, rpc.InvalidParams("Daytona runner ingress path is invalid.")
	}
	leaseID := deref(p.Lease.ProviderLeaseID)
	if leaseID == "" {
		return nil, rpc.InvalidParams("Daytona runner ingress requires a provider lease id.")
	}
	var out *rpc.IngressEndpoint
	err := d.withLiveSandbox(ctx, p.EnvironmentBase, leaseID, func(ctx context.Context, c *account, k scopeKey, sb *daytona.Sandbox) error {
		pv, _, err := c.client.Sandboxes.PreviewURL(ctx, sb.ID, RunnerIngressPort)
		if err != nil {
			return err
		}
		wsURL, err := ingressURL(pv, p.Path)
		if err != nil {
			return err
		}
		out = &rpc.IngressEndpoint{
			Kind:          "authenticated_websocket",
			WebsocketURL:  wsURL,
			SecretHeaders: []rpc.SecretHeader{{Name: previewTokenHeader, Value: pv.Token}},
			Generation:    d.ingress.generation(k, sb),
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// withLiveSandbox runs fn in the lease's activity gate on its sandbox as
// Daytona reports it now (liveSandbox), bounded like a start.
func (d *Driver) withLiveSandbox(ctx context.Context, base rpc.EnvironmentBase, leaseID string,
	fn func(ctx context.Context, c *account, k scopeKey, sb *daytona.Sandbox) error) error {
	c, err := d.resolveAccount(base.Config)
	if err != nil {
		return err
	}
	k := c.scope(base, leaseID)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AcquireBudget()+startMargin)
	defer cancel()
	return d.scopes.withActivity(ctx, k, leaseID, false, func(ctx context.Context) error {
		sb, err := d.liveSandbox(ctx, c, k, leaseID)
		if err != nil {
			return err
		}
		return fn(ctx, c, k, sb)
	})
}

// liveSandbox is the lease's sandbox as Daytona reports it now (a bounded
// fresh read, never only the cache: it may have stopped behind a cached
// handle, and the ingress generation follows its current revision),
// started if it was not.
func (d *Driver) liveSandbox(ctx context.Context, c *account, k scopeKey, leaseID string) (*daytona.Sandbox, error) {
	var sb *daytona.Sandbox
	err := c.boundCall(ctx, "sandbox.refreshData", 0, func(ctx context.Context) error {
		fresh, _, err := c.client.Sandboxes.Get(ctx, leaseID)
		if err == nil && fresh.ID != leaseID {
			err = &HandleMismatchError{Got: fresh.ID, Want: leaseID}
		}
		sb = fresh
		return err
	})
	if err != nil {
		d.handles.evict(k)
		return nil, err
	}
	d.handles.seed(k, sb)
	return d.startedSandbox(ctx, c, k, leaseID)
}

// startedSandbox is the lease's sandbox, started if it was not. As execute
// does: a restart destroyed the session, and the cache must not keep the
// stopped record (the next command would start an already started sandbox
// again).
func (d *Driver) startedSandbox(ctx context.Context, c *account, k scopeKey, leaseID string) (*daytona.Sandbox, error) {
	sb, _, err := d.sandbox(ctx, c, k, leaseID)
	if err != nil {
		return nil, err
	}
	if sb.State != daytona.StateStarted {
		d.runner.ForgetSessions(string(k))
		if sb, err = d.ensureStarted(ctx, c, sb); err != nil {
			d.handles.evict(k)
			return nil, err
		}
		d.handles.seed(k, sb)
	}
	return sb, nil
}

// Errors of a preview endpoint the ingress cannot use.
var (
	//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
	errIncompletePreview = errors.New("Daytona returned an incomplete private preview endpoint.")
	//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
	errInvalidPreview = errors.New("Daytona returned an invalid private preview URL.")
)

// ingressURL turns a private preview URL into the runner's WebSocket URL:
// wss:, the preview's path without trailing slashes, then path. The
// preview URL must be https: with no user info, query or fragment, so
// nothing but the host and path can reach the result (the token never
// does). The errors never quote the URL.
func ingressURL(pv *daytona.PreviewURL, path string) (string, error) {
	if strings.TrimSpace(pv.URL) == "" || strings.TrimSpace(pv.Token) == "" {
		return "", errIncompletePreview
	}
	u, err := url.Parse(pv.URL)
	if err != nil || u.Scheme != "https" || u.User != nil || u.RawQuery != "" || u.ForceQuery ||
		u.Fragment != "" || strings.Contains(pv.URL, "#") || u.Host == "" || u.Opaque != "" {
		return "", errInvalidPreview
	}
	return "wss://" + u.Host + strings.TrimRight(u.EscapedPath(), "/") + path, nil
}

// ingressGenerations memoises each sandbox's ingress generation for its
// revision: the generation is stable while the sandbox's revision
// (updatedAt, else createdAt) is unchanged, whatever happens to the
// preview token, and changes with a lifecycle revision (a stop and start).
// A sandbox that reports neither timestamp gets a random revision, kept
// until it reports one.
type ingressGenerations struct {
	mu sync.Mutex
	m  map[scopeKey]ingressGeneration
}

type ingressGeneration struct{ revision, generation string }

// maxIngressGenerations bounds the memo; past it, it starts over (a
// generation is recomputed from the same revision, so only a sandbox
// without timestamps would see a new one).
const maxIngressGenerations = 8192

func (g *ingressGenerations) generation(k scopeKey, sb *daytona.Sandbox) string {
	revision := sb.UpdatedAt
	if revision == "" {
		revision = sb.CreatedAt
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if e, ok := g.m[k]; ok && e.revision == revision {
		return e.generation
	}
	seed := revision
	if seed == "" {
		seed = uuid.NewString() // kept as the memo's revision "" until one is reported
	}
	sum := sha256.Sum256([]byte(sb.ID + "\x00" + seed))
	if g.m == nil || len(g.m) >= maxIngressGenerations {
		g.m = make(map[scopeKey]ingressGeneration)
	}
	e := ingressGeneration{revision: revision, generation: hex.EncodeToString(sum[:])}
	g.m[k] = e
	return e.generation
}
