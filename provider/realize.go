package provider

import (
	"context"
	"strings"

	"github.com/daytonaworker/daytona-worker/rpc"
)

func (d *Driver) realize(ctx context.Context, p rpc.RealizeParams) (rpc.RealizeResult, error) {
	remoteCwd, _ := p.Lease.Metadata["remoteCwd"].(string)
	remoteCwd = strings.TrimSpace(remoteCwd)
	for _, alt := range []*string{p.Workspace.RemotePath, p.Workspace.LocalPath} {
		if remoteCwd == "" {
			remoteCwd = deref(alt)
		}
	}
	if remoteCwd == "" {
		remoteCwd = "/" + workspaceDirName
	}
	res := rpc.RealizeResult{Cwd: remoteCwd, Metadata: map[string]any{"provider": DriverKey, "remoteCwd": remoteCwd}}
	leaseID := deref(p.Lease.ProviderLeaseID)
	if leaseID == "" {
		return res, nil
	}
	c, err := d.resolveAccount(p.Config)
	if err != nil {
		return rpc.RealizeResult{}, err
	}
	k := c.scope(p.EnvironmentBase, leaseID)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AcquireBudget()+startMargin)
	defer cancel()
	err = d.scopes.withActivity(ctx, k, leaseID, false, func(ctx context.Context) error {
		sb, err := d.startedSandbox(ctx, c, k, leaseID)
		if err != nil {
			return err
		}
		if _, err := c.client.Files.CreateFolder(ctx, sb.Ref(), remoteCwd, "755"); err != nil {
			return err
		}
		d.handles.markFresh(k)
		return nil
	})
	if err != nil {
		return rpc.RealizeResult{}, err
	}
	return res, nil
}
