package provider

import (
	"context"
	"errors"

	"github.com/daytonaworker/daytona-worker/provider/config"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// validateConfig answers environmentValidateConfig: every message of an
// invalid config (ok false, nothing normalized), else the normalized
// config with its warnings. An absent config is an empty object.
func (d *Driver) validateConfig(_ context.Context, p rpc.ValidateConfigParams) (rpc.ValidateConfigResult, error) {
	var raw any = map[string]any{}
	if len(p.Config) > 0 {
		raw = p.Config
	}
	n, err := config.ValidateAndNormalize(raw, d.env)
	var ve *config.ValidationError
	switch {
	case errors.As(err, &ve):
		return rpc.ValidateConfigResult{OK: false, Errors: ve.Errors}, nil
	case err != nil:
		return rpc.ValidateConfigResult{OK: false, Errors: []string{err.Error()}}, nil
	}
	cfg, _ := config.Parse(raw)
	return rpc.ValidateConfigResult{OK: true, NormalizedConfig: n, Warnings: config.Warnings(cfg)}, nil
}
