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

// nullable is a result field that is null rather than "" when unknown.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
