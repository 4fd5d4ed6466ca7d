package span_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/daytonaworker/daytona-worker/internal/span"
)

func TestNoRecorderRecordsNothing(t *testing.T) {
	s := span.Start(context.Background(), "transfer")
	assert.Nil(t, s)
	s.SetAttr("k", 1) // a nil span accepts every call
	s.End(errors.New("x"))
	assert.Zero(t, s.WallMs())
}

func TestSpansCarryProviderAttrsAndStatus(t *testing.T) {
	var got []span.Record
	ctx := span.WithRecorder(context.Background(), func(r span.Record) { got = append(got, r) })

	ok := span.Start(ctx, "transfer")
	ok.SetAttr(span.AttrTransferGuardCount, 1)
	ok.End(nil)
	ok.End(errors.New("ignored")) // a second End records nothing

	failed := span.Start(ctx, "session.open")
	failed.End(errors.New(strings.Repeat("e", 5000)))

	require.Len(t, got, 2)
	assert.Equal(t, "transfer", got[0].Name)
	assert.Equal(t, map[string]any{span.AttrProvider: "daytona", span.AttrTransferGuardCount: 1}, got[0].Attributes)
	assert.Nil(t, got[0].Status)
	assert.LessOrEqual(t, got[0].StartTimeMs, got[0].EndTimeMs)
	assert.Positive(t, got[0].StartTimeMs)

	assert.Equal(t, "session.open", got[1].Name)
	require.NotNil(t, got[1].Status)
	assert.Equal(t, 2, got[1].Status.Code, "a failed span has status code 2")
	assert.Less(t, len(got[1].Status.Message), 1100, "the message is bounded")
	assert.Equal(t, "paperclip.sandbox.startup.transfer.guard.count", span.AttrTransferGuardCount)
	assert.Equal(t, "paperclip.sandbox.startup.provider", span.AttrProvider)
}
