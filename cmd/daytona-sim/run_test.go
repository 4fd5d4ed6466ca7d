package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunServesUntilStdinEOF(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), []string{"-api-key", "k-test", "-dir", t.TempDir()}, inR, outW, io.Discard)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	require.NoError(t, err)
	var r ready
	require.NoError(t, json.Unmarshal([]byte(line), &r))
	assert.True(t, strings.HasPrefix(r.APIURL, "http://127.0.0.1:"), r.APIURL)
	assert.True(t, strings.HasSuffix(r.APIURL, "/api"))
	assert.Equal(t, "k-test", r.APIKey)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", r.APIURL+"/sandbox", strings.NewReader(`{"name":"sim"}`))
	req.Header.Set("Authorization", "Bearer k-test")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var sb struct {
		State           string `json:"state"`
		ToolboxProxyURL string `json:"toolboxProxyUrl"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&sb))
	resp.Body.Close()
	assert.Equal(t, "started", sb.State)
	assert.Equal(t, r.ToolboxProxyURL, sb.ToolboxProxyURL)

	inW.Close()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Run did not stop on stdin EOF")
	}
}

func TestRunStopsOnContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"-stdin-eof=false"}, nil, outW, io.Discard)
		outW.Close()
	}()
	_, err := bufio.NewReader(outR).ReadString('\n')
	require.NoError(t, err)
	cancel()
	assert.NoError(t, <-done)
	go io.Copy(io.Discard, outR)
}

func TestRunUsageErrors(t *testing.T) {
	err := Run(context.Background(), []string{"-port", "-1"}, nil, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Equal(t, 2, exitCode(err))
	err = Run(context.Background(), []string{"extra"}, nil, io.Discard, io.Discard)
	assert.Equal(t, 2, exitCode(err))
}
