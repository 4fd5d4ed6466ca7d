// Package span records provider spans: named, timed pieces of provider work
// (session open and close, the phases of a file sync) that the host shows
// under its own trace of a measured start-up step. exec and sync open spans
// with Start; the rpc server puts a Recorder in a request's context only
// when the host sent that request with a trace context, so everywhere else a
// span costs nothing and records nothing.
package span

import (
	"context"
	"time"

	"github.com/daytonaworker/daytona-worker/internal/clamp"
)

// Attribute keys. The host keeps only attributes it knows, all under one
// prefix; these are the ones a Daytona provider sets.
const (
	AttrPrefix             = "paperclip.sandbox.startup."
	AttrProvider           = AttrPrefix + "provider"
	AttrPackWallMs         = AttrPrefix + "pack.wall_ms"
	AttrTransferWallMs     = AttrPrefix + "transfer.wall_ms"
	AttrTransferGuardCount = AttrPrefix + "transfer.guard.count"
	AttrTransferDirection  = AttrPrefix + "transfer.direction"
)

// Values of AttrProvider and AttrTransferDirection.
const (
	Provider = "daytona"
	Inbound  = "inbound"  // an upload to the sandbox
	Outbound = "outbound" // a download from the sandbox
)

// StatusError is the status code of a failed span (OpenTelemetry's ERROR).
const StatusError = 2

// maxStatusMessage bounds the error text a failed span carries: the host
// only needs enough to tell failures apart.
const maxStatusMessage = 1024

// Status is a span's outcome; only failed spans carry one.
type Status struct {
	Code    int    `json:"code"`
	Message string `json:"message,omitempty"`
}

// Record is a finished span, in the shape the host's span.record takes.
type Record struct {
	Name        string         `json:"name"`
	Attributes  map[string]any `json:"attributes,omitempty"`
	Status      *Status        `json:"status,omitempty"`
	StartTimeMs int64          `json:"startTimeMs"`
	EndTimeMs   int64          `json:"endTimeMs"`
}

// Recorder receives each span when it ends. It must not block for long:
// spans end on the path of the work they measure.
type Recorder func(Record)

type recorderKey struct{}

// WithRecorder returns ctx with rec receiving the spans started under it.
func WithRecorder(ctx context.Context, rec Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, rec)
}

// Span is an open span. A nil *Span (no recorder in the context) accepts
// every call and records nothing.
type Span struct {
	rec   Recorder
	name  string
	start time.Time
	attrs map[string]any
	ended bool
}

// Start opens a span named name, or returns nil when ctx has no recorder.
// Every span carries the provider attribute. A span is used by one
// goroutine.
func Start(ctx context.Context, name string) *Span {
	rec, _ := ctx.Value(recorderKey{}).(Recorder)
	if rec == nil {
		return nil
	}
	return &Span{rec: rec, name: name, start: time.Now(), attrs: map[string]any{AttrProvider: Provider}}
}

// SetAttr sets an attribute.
func (s *Span) SetAttr(key string, value any) {
	if s != nil {
		s.attrs[key] = value
	}
}

// WallMs is the time since the span started, in milliseconds.
func (s *Span) WallMs() int64 {
	if s == nil {
		return 0
	}
	return time.Since(s.start).Milliseconds()
}

// End records the span once: failed (StatusError, with err's text) when
// err is not nil. Later calls do nothing.
func (s *Span) End(err error) {
	if s == nil || s.ended {
		return
	}
	s.ended = true
	r := Record{Name: s.name, Attributes: s.attrs, StartTimeMs: s.start.UnixMilli(), EndTimeMs: time.Now().UnixMilli()}
	if err != nil {
		r.Status = &Status{Code: StatusError, Message: clamp.Truncate(err.Error(), maxStatusMessage)}
	}
	s.rec(r)
}
