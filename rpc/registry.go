package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/daytonaworker/daytona-worker/internal/clamp"
)

// Handler serves one method. params is the raw params value (nil when the
// request had none). A nil result is sent as "result": null.
type Handler func(ctx context.Context, params json.RawMessage) (any, error)

// Registry maps method names to handlers. It is the single source of the
// supportedMethods list: a method is advertised exactly when it is
// registered. Register before serving; a Registry is not safe for concurrent
// modification.
type Registry struct {
	handlers map[string]Handler
	inline   map[string]bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{handlers: make(map[string]Handler), inline: make(map[string]bool)}
}

// RegisterInline adds a method that is answered on the read loop itself,
// without a goroutine of its own: for handlers that never block and finish
// in microseconds (health, configChanged), where a goroutine hand-off per
// call would cost more than the work.
func (r *Registry) RegisterInline(method string, h Handler) {
	r.Register(method, h)
	r.inline[method] = true
}

// Register adds a method. It panics on a duplicate or empty name: that is a
// programming error found by the first test that builds the registry.
func (r *Registry) Register(method string, h Handler) {
	if method == "" || h == nil {
		panic("rpc: Register needs a method name and a handler")
	}
	if _, dup := r.handlers[method]; dup {
		panic("rpc: method registered twice: " + method)
	}
	r.handlers[method] = h
}

// Lookup returns the handler for method.
func (r *Registry) Lookup(method string) (Handler, bool) {
	h, ok := r.handlers[method]
	return h, ok
}

// Has reports whether method is registered.
func (r *Registry) Has(method string) bool { _, ok := r.handlers[method]; return ok }

// Methods returns the registered method names, sorted.
func (r *Registry) Methods() []string {
	out := make([]string, 0, len(r.handlers))
	for m := range r.handlers {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// sdkHooks are the environment-driver methods the Paperclip SDK dispatches
// to an optional plugin hook: when the hook is absent it answers -32004
// "<method> is not implemented by this plugin", while a method it does not
// know at all is -32601 "Unknown method: <method>". The worker answers the
// same way, so a host sees the same error from this plugin as from an SDK
// plugin without that hook. The list is the SDK's at paperclip ce51d868:
// environmentTask is there (the worker declares no supportsTasks, so a host
// never calls it), environmentCancelExecution, which no SDK has, is not.
var sdkHooks = map[string]bool{
	"environmentValidateConfig": true, "environmentProbe": true,
	"environmentAcquireLease": true, "environmentResumeLease": true,
	"environmentReleaseLease": true, "environmentDestroyLease": true,
	"environmentStopLease": true, "environmentRealizeWorkspace": true,
	"environmentExecute": true, "environmentTask": true,
	"environmentSyncIn": true, "environmentSyncOut": true,
	"environmentRunnerIngressEndpoint": true,
	"environmentStartInteractiveSetup": true, "environmentGetInteractiveSetup": true,
	"environmentCancelInteractiveSetup": true,
	"environmentCaptureTemplate":        true, "environmentDeleteTemplate": true,
	"duplexChannelOpen": true, "duplexChannelWrite": true, "duplexChannelStop": true, "duplexChannelClose": true,
	"loginPtyOpen": true, "loginPtyInput": true, "loginPtyStop": true, "loginPtyClose": true,
}

// notFound is the error for a request whose method is not registered.
func notFound(method string) *Error {
	if sdkHooks[method] {
		return Errorf(CodeMethodNotImplemented, "%s is not implemented by this plugin", method)
	}
	return Errorf(CodeMethodNotFound, "Unknown method: %s", clamp.Echo(method))
}

// Typed adapts a function with typed params and result to a Handler. Params
// are decoded leniently: unknown fields are ignored (hosts add fields over
// time), absent or null params give the zero P. A value of the wrong JSON type
// is a CodeInvalidParams error naming the field.
func Typed[P, R any](f func(ctx context.Context, p P) (R, error)) Handler {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var p P
		if err := decodeParams(raw, &p); err != nil {
			return nil, err
		}
		return f(ctx, p)
	}
}

// decodeParams decodes raw into v with the rules of [Typed].
func decodeParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	err := json.Unmarshal(raw, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return InvalidParams("invalid params: expected %s, got %s", describeType(te.Type.String()), clamp.Echo(te.Value))
		}
		return InvalidParams("invalid params: %q must be %s, got %s", clamp.Echo(te.Field), describeType(te.Type.String()), clamp.Echo(te.Value))
	}
	return InvalidParams("invalid params: %s", clamp.Echo(err.Error()))
}

// describeType names a Go type the way a JSON author thinks of it.
func describeType(t string) string {
	switch {
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"), strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.HasPrefix(t, "map["), strings.Contains(t, "."), strings.HasPrefix(t, "struct"):
		return "an object"
	case strings.HasPrefix(t, "*"):
		return describeType(t[1:])
	}
	return fmt.Sprintf("of type %s", t)
}
