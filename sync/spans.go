package sync

import (
	"context"

	"github.com/daytonaworker/daytona-worker/internal/span"
)

// Provider spans of a sync (docs/sync.md#spans). Each phase that talks to
// the sandbox or packs the host tree runs inside a span the host shows under
// its trace when it traced the request: transfer (the bulk upload or
// download, with its direction, wall time and the number of serial
// sandbox round trips made before it on that path), promote and
// extractTarball (the in-sandbox scripts that place what was uploaded),
// pack (the host-side archive), postUploadCommand. Without a trace every
// span is a no-op.

// traced runs fn inside a span named name and ends the span with fn's error.
func traced(ctx context.Context, name string, fn func() error) error {
	sp := span.Start(ctx, name)
	err := fn()
	sp.End(err)
	return err
}

// transfer runs fn, the bulk upload or download of one batch, inside a
// transfer span. guards is how many sandbox round trips this path made
// before the transfer, one after another.
func transfer(ctx context.Context, direction string, guards int, fn func() error) error {
	sp := span.Start(ctx, "transfer")
	sp.SetAttr(span.AttrTransferDirection, direction)
	sp.SetAttr(span.AttrTransferGuardCount, guards)
	err := fn()
	sp.SetAttr(span.AttrTransferWallMs, sp.WallMs())
	sp.End(err)
	return err
}

// runPhase runs script in the sandbox inside a span named name; a non-zero
// exit is a SandboxCommandError naming what.
func (t Target) runPhase(ctx context.Context, name, what, script string, o Options) error {
	return traced(ctx, name, func() error {
		r, err := t.run(ctx, script, seconds(o.transferTimeout()))
		if err != nil {
			return err
		}
		if r.exit != 0 {
			return &SandboxCommandError{What: what, Exit: r.exit, Detail: r.out}
		}
		return nil
	})
}
