package daytona_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
)

// ctxRecorder is the client's transport, remembering the context the
// transport itself is given for requests whose path ends in suffix: that
// is the context whose cancellation the transport acts on.
// It also remembers the length those answers announced.
type ctxRecorder struct {
	rt     http.RoundTripper
	suffix string
	got    chan context.Context
	length atomic.Int64
}

func (r *ctxRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	match := strings.HasSuffix(req.URL.Path, r.suffix)
	if match {
		select {
		case r.got <- req.Context():
		default:
		}
	}
	resp, err := r.rt.RoundTrip(req)
	if match && resp != nil {
		r.length.Store(resp.ContentLength)
	}
	return resp, err
}

// A request whose own context is alive never fails with another request's
// cancellation. Go's HTTP/1 transport puts a connection whose answer has no
// body (Content-Length: 0) back in the pool, where the next request may take
// it at once, before it hands that answer to the request it belongs to; a
// cancellation of that request in between closes the connection under the
// next one, which then fails with the first request's cause. Here the first
// request (A) is a log snapshot of a command that printed nothing,
// cancelled with a cause of its own exactly in that window (its
// PutIdleConn hook, after the session create B took the connection), and
// B is a session create waiting for the one connection the transport
// allows per host.
func TestRequestNeverFailsWithAnotherRequestsCancellation(t *testing.T) {
	tr := daytona.NewTransport()
	tr.MaxConnsPerHost = 1 // B must wait for A's connection
	rec := &ctxRecorder{rt: tr, suffix: "/logs", got: make(chan context.Context, 1)}
	rec.length.Store(-1)
	env := testenv.New(t, testenv.WithClient(daytona.WithHTTPClient(&http.Client{Transport: rec})))
	sb := env.StartSandbox(t, nil)
	ref := sb.Ref()
	ctx := t.Context()
	_, err := env.Client.Toolbox.CreateSession(ctx, ref, "s1")
	require.NoError(t, err)
	ex, _, err := env.Client.Toolbox.ExecuteSessionCommand(ctx, ref, "s1", &daytona.SessionExecuteRequest{Command: "true", RunAsync: true})
	require.NoError(t, err)
	_, err = env.Server.AwaitCommand(ctx, sb.ID, "s1", ex.CmdID)
	require.NoError(t, err)

	causeA := errors.New("request A's own bound exceeded")
	ctxA, cancelA := context.WithCancelCause(ctx)
	defer cancelA(nil)
	aHasConn, bHasConn, aDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var aOnce, bOnce sync.Once
	ctxA = httptrace.WithClientTrace(ctxA, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { aOnce.Do(func() { close(aHasConn) }) },
		PutIdleConn: func(err error) {
			if err != nil {
				return
			}
			// The connection is back in the pool and A's answer not yet
			// handed to A: B takes the connection, then A is cancelled.
			<-bHasConn
			cancelA(causeA)
			transportCtx := <-rec.got
			if transportCtx.Err() != nil {
				// The transport saw the cancellation: wait until it has
				// acted on it (A's call returns once the connection is
				// closed, while this hook still holds A's answer back).
				<-aDone
			}
		},
	})
	ctxB := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { bOnce.Do(func() { close(bHasConn) }) },
	})

	go func() {
		defer close(aDone)
		_ = env.Client.Toolbox.StreamSessionCommandLogs(ctxA, ref, "s1", ex.CmdID, func(daytona.LogChunk) error { return nil })
	}()
	<-aHasConn // B can only wait for A's connection now
	_, errB := env.Client.Toolbox.CreateSession(ctxB, ref, "s2")
	<-aDone
	require.NoError(t, ctxB.Err(), "B's own context is alive")
	require.NotErrorIs(t, errB, causeA, "B failed with A's cancellation cause")
	require.NoError(t, errB)
	require.Contains(t, env.Server.Sessions(sb.ID), "s2")
	require.Zero(t, rec.length.Load(), "A's answer has no body: the case this test is about")
}
