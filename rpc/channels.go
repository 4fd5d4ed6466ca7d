package rpc

import (
	"context"
	"encoding/json"
)

// Support for the long-lived channels a worker serves besides requests (the
// login terminal and the duplex byte channel): notifications a channel
// sends after the request that opened it has been answered, a hook that
// runs once a response is on the wire, and methods whose requests must be
// taken in arrival order although their answers may wait.

// Notification methods of the channels.
const (
	LoginPtyOutputMethod = "loginPty.output"
	LoginPtyExitMethod   = "loginPty.exit"
	DuplexDataMethod     = "duplexChannel.data"
	DuplexExitMethod     = "duplexChannel.exit"
)

// Notifier sends notifications of the serving session it came from, from
// any goroutine and after the request that handed it out was answered.
type Notifier struct{ s *server }

// NotifierFrom returns the notifier of the serving session ctx belongs to,
// or nil when ctx carries none.
func NotifierFrom(ctx context.Context) *Notifier {
	s, _ := ctx.Value(serverKey{}).(*server)
	if s == nil {
		return nil
	}
	return &Notifier{s: s}
}

type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// Notify writes one notification frame (no id, so the host never answers
// it). It fails once serving has ended.
func (n *Notifier) Notify(method string, params any) error {
	return n.s.stream.writeFrame(notification{JSONRPC: "2.0", Method: method, Params: params})
}

// AfterReply runs fn once the response to the request ctx serves has been
// written (or could not be): a channel opened by the request sends nothing
// before the host knows its id. When the request was already answered fn
// runs at once. It reports false, and does not run fn, when ctx serves no
// request.
func AfterReply(ctx context.Context, fn func()) bool {
	r, _ := ctx.Value(requestKey{}).(*request)
	if r == nil {
		return false
	}
	r.mu.Lock()
	if !r.answered {
		r.after = append(r.after, fn)
		r.mu.Unlock()
		return true
	}
	r.mu.Unlock()
	fn()
	return true
}

// runAfter runs the request's AfterReply functions, once.
func (r *request) runAfter() {
	r.mu.Lock()
	after := r.after
	r.after = nil
	r.mu.Unlock()
	for _, fn := range after {
		fn()
	}
}

// Continuation is the part of an ordered method that may wait: its result
// is the request's answer.
type Continuation func(ctx context.Context) (any, error)

// later marks a result as a continuation still to run.
type later Continuation

// RegisterOrdered adds a method whose requests are taken in the order they
// arrived: take runs on the read loop, before the next frame is read, so it
// must only validate and enqueue (microseconds, never block); the
// continuation it returns runs in its own goroutine and answers the
// request. A take that fails answers at once. Writes to one byte stream
// need this: with a goroutine per request, two writes could reach the
// stream in either order.
func (r *Registry) RegisterOrdered(method string, take func(ctx context.Context, params json.RawMessage) (Continuation, error)) {
	r.RegisterInline(method, func(ctx context.Context, params json.RawMessage) (any, error) {
		c, err := take(ctx, params)
		if err != nil || c == nil {
			return nil, err
		}
		return later(c), nil
	})
}

// TypedOrdered is [Typed] for RegisterOrdered.
func TypedOrdered[P any](take func(ctx context.Context, p P) (Continuation, error)) func(context.Context, json.RawMessage) (Continuation, error) {
	return func(ctx context.Context, raw json.RawMessage) (Continuation, error) {
		var p P
		if err := decodeParams(raw, &p); err != nil {
			return nil, err
		}
		return take(ctx, p)
	}
}

// Wire types of the login terminal and the duplex channel.

// LoginPtyOpenParams are loginPtyOpen's params.
type LoginPtyOpenParams struct {
	HostRouteID     string `json:"hostRouteId"`
	DriverKey       string `json:"driverKey"`
	CompanyID       string `json:"companyId"`
	EnvironmentID   string `json:"environmentId"`
	ProviderLeaseID string `json:"providerLeaseId"`
	LoginCommandKey string `json:"loginCommandKey"`
	SessionHome     string `json:"sessionHome"`
}

// LoginPtyOpenResult is loginPtyOpen's result.
type LoginPtyOpenResult struct {
	WorkerSessionID string `json:"workerSessionId"`
}

// LoginPtyInputParams are loginPtyInput's params; Data is raw text.
type LoginPtyInputParams struct {
	WorkerSessionID string `json:"workerSessionId"`
	Data            string `json:"data"`
}

// LoginPtyStopParams are loginPtyStop's params.
type LoginPtyStopParams struct {
	WorkerSessionID string `json:"workerSessionId"`
}

// ChannelCloseParams are loginPtyClose's and duplexChannelClose's params.
type ChannelCloseParams struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
}

// LoginPtyCloseResult is loginPtyClose's result: the host route id echoed.
type LoginPtyCloseResult struct {
	HostRouteID string `json:"hostRouteId"`
}

// LoginPtyOutput is a loginPty.output notification; Chunk is raw text.
type LoginPtyOutput struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	Chunk           string `json:"chunk"`
}

// LoginPtyExit is a loginPty.exit notification.
type LoginPtyExit struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	ExitCode        *int   `json:"exitCode"`
}

// DuplexOpenParams are duplexChannelOpen's params.
type DuplexOpenParams struct {
	HostRouteID     string   `json:"hostRouteId"`
	DriverKey       string   `json:"driverKey"`
	CompanyID       string   `json:"companyId"`
	EnvironmentID   string   `json:"environmentId"`
	ProviderLeaseID string   `json:"providerLeaseId"`
	Command         []string `json:"command"`
}

// DuplexRoute names a bound duplex channel: open's result, and the ids of
// write and stop.
type DuplexRoute struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
}

// DuplexWriteParams are duplexChannelWrite's params; Data is canonical
// padded standard base64.
type DuplexWriteParams struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	Data            string `json:"data"`
}

// DuplexCloseResult is duplexChannelClose's result: the host route id, and
// the worker session id when the route was bound.
type DuplexCloseResult struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId,omitempty"`
}

// DuplexData is a duplexChannel.data notification; Chunk is base64.
type DuplexData struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	Chunk           string `json:"chunk"`
}

// DuplexExit is a duplexChannel.exit notification.
type DuplexExit struct {
	HostRouteID     string `json:"hostRouteId"`
	WorkerSessionID string `json:"workerSessionId"`
	ExitCode        *int   `json:"exitCode"`
	TransportClosed bool   `json:"transportClosed"`
}
