package provider

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/bound"
	"github.com/daytonaworker/daytona-worker/provider/config"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// account is one call's resolved Daytona account: the parsed config, a
// client for it and the account fingerprint that scopes caches and
// evidence. The API key lives only inside the client.
type account struct {
	cfg         config.Config
	client      *daytona.Client
	fingerprint string
}

// resolveAccount parses the config and builds a client. Config errors are invalid
// params; a missing key is the reference's message.
func (d *Driver) resolveAccount(raw json.RawMessage) (*account, error) {
	cfg, err := config.Parse(raw)
	if err != nil {
		return nil, rpc.InvalidParams("invalid config: %v", err)
	}
	key, err := config.ResolveAPIKey(cfg, d.env)
	if err != nil {
		return nil, err
	}
	opts := []daytona.Option{daytona.WithAPIKey(key), daytona.WithHTTPClient(d.http)}
	if cfg.APIURL != "" {
		opts = append(opts, daytona.WithAPIURL(cfg.APIURL))
	}
	if cfg.Target != "" {
		opts = append(opts, daytona.WithTarget(cfg.Target))
	}
	if d.poll != nil {
		opts = append(opts, daytona.WithPollBackOff(d.poll))
	}
	if d.retry != nil {
		opts = append(opts, daytona.WithRetryPolicy(*d.retry))
	}
	client, err := daytona.NewClient(opts...)
	if err != nil {
		return nil, rpc.InvalidParams("invalid Daytona connection settings: %v", err)
	}
	return &account{cfg: cfg, client: client, fingerprint: config.AccountFingerprint(key, cfg.APIURL)}, nil
}

// scope is the key of a lease of this account: caches, gates and evidence
// are never shared across accounts, companies or environments.
func (c *account) scope(p rpc.EnvironmentBase, leaseID string) scopeKey {
	driverKey := p.DriverKey
	if driverKey == "" {
		driverKey = DriverKey
	}
	return makeScopeKey(driverKey, p.CompanyID, p.EnvironmentID, leaseID, c.fingerprint)
}

// boundCall bounds a provider call by livenessTimeoutMs, capped at max when
// max > 0 (docs/behavior.md#liveness-bound; non-positive liveness disables).
func (c *account) boundCall(ctx context.Context, op string, max time.Duration, fn func(context.Context) error) error {
	limit, ok := c.cfg.LivenessBound()
	if !ok {
		return fn(ctx)
	}
	if max > 0 && limit > max {
		limit = max
	}
	return bound.Call(ctx, op, limit, fn)
}

// sandboxOrNil reads a sandbox; NotFound is (nil, nil).
func (c *account) sandboxOrNil(ctx context.Context, id string) (*daytona.Sandbox, error) {
	sb, _, err := c.client.Sandboxes.Get(ctx, id)
	if errors.Is(err, daytona.ErrNotFound) {
		return nil, nil
	}
	return sb, err
}
