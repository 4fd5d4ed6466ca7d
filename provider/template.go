package provider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/clamp"
	"github.com/daytonaworker/daytona-worker/provider/config"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// Templates: a setup sandbox captured as a Daytona snapshot, and the
// deletion of such a snapshot.

// maxTemplateName is the longest snapshot name a capture gives.
const maxTemplateName = 96

var templateNameJunk = regexp.MustCompile(`[^a-z0-9._-]+`)

// templateName is the snapshot name of a capture: the label trimmed,
// lower-cased, every run of characters outside [a-z0-9._-] one '-', no
// leading or trailing '-', at most 96 characters; when nothing is left,
// paperclip-<environment>-<8 random hex digits>, sanitised the same way.
func templateName(label, environmentID string) string {
	if name := sanitizeTemplateName(label); name != "" {
		return name
	}
	return sanitizeTemplateName("paperclip-" + environmentID + "-" + uuid.NewString()[:8])
}

func sanitizeTemplateName(s string) string {
	s = templateNameJunk.ReplaceAllString(strings.ToLower(strings.TrimSpace(s)), "-")
	s = strings.Trim(s, "-")
	if len(s) > maxTemplateName {
		s = strings.TrimRight(s[:maxTemplateName], "-")
	}
	return s
}

func (d *Driver) captureTemplate(ctx context.Context, p rpc.CaptureParams) (*rpc.CaptureResult, error) {
	id := deref(p.ProviderLeaseID)
	if id == "" {
		return nil, rpc.InvalidParams("Cannot capture a Daytona template without a setup sandbox lease.")
	}
	c, err := d.resolveAccount(p.Config)
	if err != nil {
		return nil, err
	}
	name := templateName(deref(p.TemplateLabel), p.EnvironmentID)
	timeout := clamp.Millis(config.ResolveTimeoutMs(p.TimeoutMs, c.cfg)) // at most a day, whatever the host sends
	timeoutMs := timeout.Milliseconds()
	k := c.scope(p.EnvironmentBase, id)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = d.scopes.withActivity(ctx, k, id, false, func(ctx context.Context) error {
		sb, _, err := d.sandbox(ctx, c, k, id)
		if err != nil {
			return err
		}
		if _, _, err := c.client.Sandboxes.CreateSnapshot(ctx, sb.ID, name); err != nil {
			return err
		}
		// The sandbox is snapshotting until the capture ends; the
		// cached record is stale from here on.
		d.handles.evict(k)
		if _, err := c.client.Sandboxes.WaitForState(ctx, sb.ID, daytona.StateStarted, daytona.StateStopped, daytona.StateArchived); err != nil {
			return err
		}
		sn, _, err := c.client.Snapshots.Get(ctx, name)
		if err != nil {
			return err
		}
		if sn.State == daytona.SnapshotError || sn.State == daytona.SnapshotBuildFailed {
			reason := "unknown error"
			if sn.ErrorReason != nil && *sn.ErrorReason != "" {
				reason = *sn.ErrorReason
			}
			//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
			return fmt.Errorf("Daytona snapshot %s failed: %s", name, clamp.Echo(reason))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &rpc.CaptureResult{TemplateKind: "snapshot", TemplateRef: name, Metadata: map[string]any{
		"provider": DriverKey, "sandboxId": id, "capturedAt": d.now().UTC().Format(isoMillis),
		"sourceTemplateRefRedacted": deref(p.SourceTemplateRef) != "", "previousTemplateRefRedacted": deref(p.PreviousTemplateRef) != "",
		"timeoutMs": timeoutMs,
	}}, nil
}

func (d *Driver) deleteTemplate(ctx context.Context, p rpc.DeleteTemplateParams) (*rpc.DeleteTemplateResult, error) {
	kind := deref(p.TemplateKind)
	if kind == "" {
		kind = "snapshot"
	}
	if kind != "snapshot" {
		return nil, rpc.InvalidParams("Daytona can delete snapshot templates only, not %s.", clamp.Echo(kind))
	}
	ref := strings.TrimSpace(p.TemplateRef)
	if ref == "" {
		return nil, rpc.InvalidParams("Cannot delete a Daytona template without a template reference.")
	}
	c, err := d.resolveAccount(p.Config)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AcquireBudget())
	defer cancel()
	md := map[string]any{"provider": DriverKey, "templateKind": "snapshot", "templateRefRedacted": true, "reason": nullable(deref(p.Reason))}
	sn, _, err := c.client.Snapshots.Get(ctx, ref)
	if err == nil {
		_, err = c.client.Snapshots.Delete(ctx, sn.ID)
	}
	switch {
	case errors.Is(err, daytona.ErrNotFound):
		// Already gone: nothing was deleted now, and nothing is left.
		md["missing"] = true
		return &rpc.DeleteTemplateResult{Deleted: false, Metadata: md}, nil
	case err != nil:
		return nil, err
	}
	return &rpc.DeleteTemplateResult{Deleted: true, Metadata: md}, nil
}
