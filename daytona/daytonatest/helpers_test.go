package daytonatest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/daytonaworker/daytona-worker/daytona/daytonatest"
	"github.com/daytonaworker/daytona-worker/internal/testenv"
	"github.com/stretchr/testify/require"
)

// tc drives the emulator over plain HTTP, the way a client would.
type tc struct {
	t   *testing.T
	srv *daytonatest.Server
	hc  *http.Client
}

func newTC(t *testing.T, opts ...daytonatest.Option) *tc {
	t.Helper()
	srv := testenv.Server(t, opts...)
	return &tc{t: t, srv: srv, hc: &http.Client{}}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// req sends a request with auth and the modern SDK version header.
func (c *tc) req(ctx context.Context, method, url string, body any, hdr map[string]string) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		case []byte:
			rd = bytes.NewReader(b)
		default:
			raw, err := json.Marshal(b)
			require.NoError(c.t, err)
			rd = bytes.NewReader(raw)
		}
	}
	r, err := http.NewRequestWithContext(ctx, method, url, rd)
	require.NoError(c.t, err)
	r.Header.Set("Authorization", "Bearer "+c.srv.APIKey())
	r.Header.Set("X-Daytona-SDK-Version", "0.190.0")
	r.Header.Set("X-Daytona-Source", "daytonatest-test")
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	resp, err := c.hc.Do(r)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// api calls the control plane and returns status and body.
func (c *tc) api(method, path string, body any) (int, []byte) {
	c.t.Helper()
	resp, b, err := c.req(ctxT(c.t), method, c.srv.URL()+path, body, nil)
	require.NoError(c.t, err)
	return resp.StatusCode, b
}

// tb calls the toolbox of a sandbox.
func (c *tc) tb(id, method, path string, body any) (int, []byte) {
	c.t.Helper()
	resp, b, err := c.req(ctxT(c.t), method, c.srv.ToolboxURL()+"/"+id+path, body, nil)
	require.NoError(c.t, err)
	return resp.StatusCode, b
}

type sbDTO struct {
	ID                  string            `json:"id"`
	Name                string            `json:"name"`
	State               string            `json:"state"`
	DesiredState        string            `json:"desiredState"`
	ErrorReason         string            `json:"errorReason"`
	Recoverable         bool              `json:"recoverable"`
	Labels              map[string]string `json:"labels"`
	Env                 map[string]string `json:"env"`
	AutoStopInterval    int               `json:"autoStopInterval"`
	AutoArchiveInterval int               `json:"autoArchiveInterval"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval"`
	ToolboxProxyURL     string            `json:"toolboxProxyUrl"`
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(b, &v), string(b))
	return v
}

// create makes a started sandbox.
func (c *tc) create(body map[string]any) sbDTO {
	c.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	st, b := c.api("POST", "/sandbox", body)
	require.Equal(c.t, 200, st, string(b))
	return decode[sbDTO](c.t, b)
}

func (c *tc) get(idOrName string) (int, sbDTO) {
	c.t.Helper()
	st, b := c.api("GET", "/sandbox/"+idOrName, nil)
	if st != 200 {
		return st, sbDTO{}
	}
	return st, decode[sbDTO](c.t, b)
}

type apiError struct {
	StatusCode int    `json:"statusCode"`
	Message    string `json:"message"`
	Error      string `json:"error"`
	Code       string `json:"code"`
}
