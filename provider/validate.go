package provider

import (
	"context"
	"errors"

	"github.com/daytonaworker/daytona-worker/provider/config"
	"github.com/daytonaworker/daytona-worker/rpc"
)

func (d *Driver) validateConfig(_ context.Context, p rpc.ValidateConfigParams) (rpc.ValidateConfigResult, error) {
	var raw any = p.Config
	if len(p.Config) == 0 {
		raw = map[string]any{}
	}
	if errs := config.Validate(raw, d.env); len(errs) > 0 {
		return rpc.ValidateConfigResult{OK: false, Errors: errs}, nil
	}
	n, err := config.ValidateAndNormalize(raw, d.env)
	if err != nil {
		var ve *config.ValidationError
		if errors.As(err, &ve) {
			return rpc.ValidateConfigResult{OK: false, Errors: ve.Errors}, nil
		}
		return rpc.ValidateConfigResult{OK: false, Errors: []string{err.Error()}}, nil
	}
	cfg, _ := config.Parse(raw)
	return rpc.ValidateConfigResult{OK: true, NormalizedConfig: n, Warnings: config.Warnings(cfg)}, nil
}
