package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// testRegistry is the registry the Serve tests run against: one method per
// kind of handler outcome. Closing the returned channel releases "block".
func testRegistry() (*Registry, chan struct{}) {
	release := make(chan struct{})
	reg := NewRegistry()
	reg.Register("echo", func(_ context.Context, p json.RawMessage) (any, error) { return p, nil })
	reg.Register("block", func(ctx context.Context, _ json.RawMessage) (any, error) {
		select {
		case <-release:
			return "released", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	reg.Register("boom", func(context.Context, json.RawMessage) (any, error) { panic("kaboom") })
	type typed struct {
		TimeoutMs int               `json:"timeoutMs"`
		Env       map[string]string `json:"env"`
		Lease     struct {
			ID string `json:"providerLeaseId"`
		} `json:"lease"`
	}
	reg.Register("typed", Typed(func(_ context.Context, p typed) (typed, error) { return p, nil }))
	reg.Register("fail", func(context.Context, json.RawMessage) (any, error) {
		return nil, &Error{Code: CodeWorkerError, Message: "creation failed", Data: map[string]any{"schema": "x/v1"}}
	})
	reg.Register("plainfail", func(context.Context, json.RawMessage) (any, error) {
		return nil, fmt.Errorf("wrapped: %w", errors.New("daytona said no"))
	})
	return reg, release
}
