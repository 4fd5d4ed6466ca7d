// Package spantest collects the provider spans a test's code records, so
// exec and sync tests can check the names, order, attributes and status of
// the spans the product emits.
package spantest

import (
	"context"
	stdsync "sync"

	"github.com/daytonaworker/daytona-worker/internal/span"
)

// Recorder keeps every span recorded under its context.
type Recorder struct {
	mu   stdsync.Mutex
	recs []span.Record
}

// New returns ctx carrying a fresh Recorder, and the Recorder.
func New(ctx context.Context) (context.Context, *Recorder) {
	r := &Recorder{}
	return span.WithRecorder(ctx, r.add), r
}

func (r *Recorder) add(rec span.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
}

// Records is a copy of the spans recorded so far, in the order they ended.
func (r *Recorder) Records() []span.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]span.Record(nil), r.recs...)
}

// Names is the names of Records, failed spans suffixed with "!".
func (r *Recorder) Names() []string {
	var names []string
	for _, rec := range r.Records() {
		n := rec.Name
		if rec.Status != nil && rec.Status.Code == span.StatusError {
			n += "!"
		}
		names = append(names, n)
	}
	return names
}
