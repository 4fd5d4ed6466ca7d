package daytonatest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRequestLogCountsBodyBytes: every logged request carries the bytes of
// its body the emulator read and of the reply body it wrote, and
// WireBytes sums them (what a benchmark counts as moved on the wire).
func TestRequestLogCountsBodyBytes(t *testing.T) {
	c := newTC(t)
	sb := c.create(nil)
	c.srv.ResetRequests()
	body := `{"command":"printf 0123456789"}`
	st, reply := c.tb(sb.ID, http.MethodPost, "/process/execute", body)
	require.Equal(t, http.StatusOK, st, string(reply))
	require.Contains(t, string(reply), "0123456789")
	reqs := settled(t, c)
	require.Len(t, reqs, 1)
	assert.EqualValues(t, len(body), reqs[0].BodyBytes)
	assert.EqualValues(t, len(reply), reqs[0].ReplyBytes)
	in, out := c.srv.WireBytes()
	assert.EqualValues(t, len(body), in)
	assert.EqualValues(t, len(reply), out)

	// A body the handler does not read is not counted as read.
	c.srv.ResetRequests()
	st, _ = c.api(http.MethodGet, "/sandbox/"+sb.ID, strings.Repeat("x", 10))
	require.Equal(t, http.StatusOK, st)
	reqs = settled(t, c)
	require.Len(t, reqs, 1)
	assert.Zero(t, reqs[0].BodyBytes)
	assert.Positive(t, reqs[0].ReplyBytes)
}
