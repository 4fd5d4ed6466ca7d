package provider

import (
	"fmt"
	"strings"
	"testing"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/rpc"
	"github.com/stretchr/testify/require"
)

// The provider's own bounds, each at the bound and one past it
// (docs/testing.md, "Limits at the limit"). Retries of start and stop are
// in resume_test.go and aftermath_test.go.

// A sync mapping's mode is a permission number from 0 to 0o7777; a
// post-upload command's timeout applies when positive.
func TestSyncParamLimitsAtTheLimit(t *testing.T) {
	op := func(mode *float64, timeoutMs *float64) []rpc.SyncOperation {
		return []rpc.SyncOperation{{OperationID: "o", Files: []rpc.SyncFileMapping{{SourcePath: "/s", TargetPath: "/t", Kind: "file", Mode: mode}},
			PostUploadCommands: []rpc.SyncCommand{{Command: "true", TimeoutMs: timeoutMs}}}}
	}
	for mode, ok := range map[float64]bool{0: true, 0o7777: true, 0o7777 + 1: false, -1: false, 0.5: false} {
		_, err := syncOperations(op(&mode, nil))
		require.Equal(t, ok, err == nil, "mode %o: %v", int(mode), err)
	}
	for ms, want := range map[float64]string{1: "1ms", 0: "0s", -1: "0s"} {
		ops, err := syncOperations(op(nil, &ms))
		require.NoError(t, err)
		require.Equal(t, want, ops[0].PostUploadCommands[0].Timeout.String(), "timeoutMs %v", ms)
	}
}

// A scope's writable-dir store keeps at most maxWritableDirs directories.
func TestWritableDirsAtTheLimit(t *testing.T) {
	var s scopes
	k := scopeKey("k")
	rw := "rw"
	files := func(from, n int) []rpc.SyncOperation {
		var fs []rpc.SyncFileMapping
		for i := from; i < from+n; i++ {
			fs = append(fs, rpc.SyncFileMapping{TargetPath: fmt.Sprintf("/d%d/f", i), Access: &rw})
		}
		return []rpc.SyncOperation{{Files: fs}}
	}
	s.recordWritable(k, files(0, maxWritableDirs))
	require.Len(t, s.m[k].writable, maxWritableDirs, "exactly the limit is kept")
	require.True(t, s.m[k].writable[fmt.Sprintf("/d%d", maxWritableDirs-1)])
	s.recordWritable(k, files(maxWritableDirs, 1))
	require.Len(t, s.m[k].writable, maxWritableDirs, "one more is not")
	require.False(t, s.m[k].writable[fmt.Sprintf("/d%d", maxWritableDirs)])
}

// The ingress generation memo holds maxIngressGenerations leases; the
// next one starts it afresh rather than growing it.
func TestIngressGenerationsAtTheLimit(t *testing.T) {
	var g ingressGenerations
	sb := func(i int) *daytona.Sandbox {
		return &daytona.Sandbox{ID: fmt.Sprint(i), UpdatedAt: "2026-01-01T00:00:00Z"}
	}
	for i := range maxIngressGenerations {
		g.generation(scopeKey(fmt.Sprint(i)), sb(i))
	}
	require.Len(t, g.m, maxIngressGenerations)
	first := g.generation("0", sb(0))
	require.Len(t, g.m, maxIngressGenerations, "a known lease adds nothing")
	g.generation("new", sb(-1))
	require.Len(t, g.m, 1, "one past the limit: the memo starts afresh")
	require.Equal(t, first, g.generation("0", sb(0)), "the same revision gives the same generation")
}

// An ingress generation follows the sandbox's revision: updatedAt, else
// createdAt; it differs between sandboxes of the same revision; a sandbox
// that reports neither gets a random one, kept until it reports one.
func TestIngressGenerationFollowsTheRevision(t *testing.T) {
	var g ingressGenerations
	const t1, t2 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"
	a := g.generation("a", &daytona.Sandbox{ID: "a", CreatedAt: t1, UpdatedAt: t2})
	require.Len(t, a, 64)
	require.Equal(t, a, g.generation("a", &daytona.Sandbox{ID: "a", CreatedAt: t2, UpdatedAt: t2}), "createdAt does not count while updatedAt is set")
	require.NotEqual(t, a, g.generation("a", &daytona.Sandbox{ID: "a", CreatedAt: t1, UpdatedAt: t1}), "a new updatedAt is a new revision")
	created := g.generation("c", &daytona.Sandbox{ID: "c", CreatedAt: t1})
	require.Equal(t, created, g.generation("c", &daytona.Sandbox{ID: "c", CreatedAt: t1}))
	require.NotEqual(t, created, g.generation("c", &daytona.Sandbox{ID: "c", CreatedAt: t2}), "without updatedAt, createdAt is the revision")
	require.NotEqual(t, g.generation("x", &daytona.Sandbox{ID: "x", UpdatedAt: t1}), g.generation("y", &daytona.Sandbox{ID: "y", UpdatedAt: t1}),
		"two sandboxes of one revision")

	none := g.generation("n", &daytona.Sandbox{ID: "n"})
	require.Equal(t, none, g.generation("n", &daytona.Sandbox{ID: "n"}), "kept while no revision is reported")
	var other ingressGenerations
	require.NotEqual(t, none, other.generation("n", &daytona.Sandbox{ID: "n"}), "random, not derived from the id alone")
	require.NotEqual(t, none, g.generation("n", &daytona.Sandbox{ID: "n", UpdatedAt: t1}), "replaced once a revision is reported")
}

// Template names are cut to maxTemplateName characters, and a cut never
// ends on a dash.
func TestTemplateNameAtTheLimit(t *testing.T) {
	at := strings.Repeat("a", maxTemplateName)
	require.Equal(t, at, sanitizeTemplateName(at))
	require.Equal(t, at, sanitizeTemplateName(at+"b"))
	require.Equal(t, strings.Repeat("a", maxTemplateName-1), sanitizeTemplateName(strings.Repeat("a", maxTemplateName-1)+"-b"))
}

// A delete Daytona refuses with 409 every time is tried exactly
// 1 + maxDeleteRetries times; the destroy fails, the sandbox stays, and
// the allocation evidence with it.
func TestDeleteRefusedEveryTimeIsTriedExactlyThreeTimes(t *testing.T) {
	require.Equal(t, 2, maxDeleteRetries)
	e, l, id := leased(t, nil)
	e.srv.Inject(daytonatest.Fault{Method: "DELETE", Route: rSandbox, Status: 409,
		Body: `{"statusCode":409,"message":"state change in progress"}`})
	e.srv.ResetRequests()
	_, err := e.call("environmentDestroyLease", e.leaseParams(l, nil))
	require.Error(t, err)
	require.Equal(t, 1+maxDeleteRetries, e.srv.CountRequests("DELETE", rSandbox))
	require.Equal(t, "started", e.state(id))
	require.Equal(t, 1, e.d.idle.report().Allocations)
}
