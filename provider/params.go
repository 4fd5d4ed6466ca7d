package provider

import (
	"strings"

	"github.com/daytonaworker/daytona-worker/rpc"
)

// Helpers for reading host params and writing results, shared by every
// host method: one copy of each rule.

// deref reads an optional string param: absent and blank are both "".
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return strings.TrimSpace(*s)
}

// nulParam is the -32602 answer to a NUL byte in the named param field.
func nulParam(field string) error {
	return rpc.InvalidParams("invalid params: %s contains a NUL byte", field)
}

// shellOf is the lease's shell for host-built scripts (bash or sh).
func shellOf(md map[string]any) string {
	if s, _ := md["shellCommand"].(string); strings.TrimSpace(s) == "bash" {
		return "bash"
	}
	return "sh"
}

// nullable is a result field that is null rather than "" when unknown.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
