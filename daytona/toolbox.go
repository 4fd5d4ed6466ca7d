package daytona

import (
	"context"
	"fmt"
)

// ToolboxService runs commands inside a sandbox through its toolbox
// (docs/daytona.md#process): work dirs, one-shot execute, sessions, command
// status, logs and input. Calls are addressed with a [SandboxRef].
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/process
type ToolboxService service

type dirBody struct {
	Dir string `json:"dir"`
}

// WorkDir returns the daemon's working directory (image WORKDIR or home).
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/info/GET/work-dir
func (s *ToolboxService) WorkDir(ctx context.Context, ref SandboxRef) (string, *Response, error) {
	return s.dir(ctx, ref, rWorkDir)
}

// UserHomeDir returns the sandbox user's home directory.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/info/GET/user-home-dir
func (s *ToolboxService) UserHomeDir(ctx context.Context, ref SandboxRef) (string, *Response, error) {
	return s.dir(ctx, ref, rHomeDir)
}

func (s *ToolboxService) dir(ctx context.Context, ref SandboxRef, rt *route) (string, *Response, error) {
	var out dirBody
	r, err := s.client.do(ctx, &call{rt: rt, ref: ref}, &out)
	if err != nil {
		return "", r, err
	}
	if out.Dir == "" {
		return "", r, fmt.Errorf("%w: %s: empty dir", ErrMalformedResponse, rt)
	}
	return out.Dir, r, nil
}
