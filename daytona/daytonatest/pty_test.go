package daytonatest_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// connectPTY creates a PTY and attaches to it, past the control message.
func connectPTY(t *testing.T, c *tc, sbID, id string) *websocket.Conn {
	t.Helper()
	st, b := c.tb(sbID, "POST", "/process/pty", map[string]any{"id": id, "lazyStart": true})
	require.Equal(t, 201, st, string(b))
	conn, err := c.dial(ctxT(t), sbID, "/process/pty/"+id+"/connect")
	require.NoError(t, err)
	conn.SetReadLimit(1 << 20)
	_, p, err := conn.Read(ctxT(t))
	require.NoError(t, err)
	require.Contains(t, string(p), `"connected"`)
	return conn
}

// An input message over 64 KiB closes the terminal's socket with 1009, as
// Daytona's does; one of 64 KiB is input like any other.
func TestPTYInputOver64KiBCloses1009(t *testing.T) {
	t.Parallel()
	c := newTC(t)
	sb := c.create(nil)
	ctx := ctxT(t)
	conn := connectPTY(t, c, sb.ID, "big")
	require.NoError(t, conn.Write(ctx, websocket.MessageBinary, bytes.Repeat([]byte{' '}, 64<<10)))
	require.NoError(t, conn.Write(ctx, websocket.MessageBinary, bytes.Repeat([]byte{' '}, 64<<10+1)))
	_, _, err := readAll(ctx, conn)
	var ce websocket.CloseError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, websocket.StatusMessageTooBig, ce.Code)
}

// DropPTYConnections (and its HTTP form for other processes) cuts the
// socket without a close frame; the process keeps running and a new
// client can attach.
func TestDropPTYConnections(t *testing.T) {
	t.Parallel()
	c := newTC(t)
	sb := c.create(nil)
	ctx := ctxT(t)
	conn := connectPTY(t, c, sb.ID, "cut")
	req, err := http.NewRequestWithContext(ctx, "POST", c.srv.URL()+"/__sim/pty-drop?sandbox="+sb.ID, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer wrong")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 401, resp.StatusCode)
	req.Header.Set("Authorization", "Bearer "+c.srv.APIKey())
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.JSONEq(t, `{"dropped":1}`, string(body))
	_, _, err = readAll(ctx, conn)
	var ce websocket.CloseError
	require.Error(t, err)
	require.False(t, errors.As(err, &ce), "no close frame: %v", err)
	require.Equal(t, []string{"cut"}, c.srv.PTYs(sb.ID), "the process keeps running")
	require.Zero(t, c.srv.DropPTYConnections("no-such-sandbox"))
}
