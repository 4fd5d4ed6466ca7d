package sync

import (
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	stdsync "sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cutProxy is a loopback TCP proxy in front of the emulator's toolbox that
// cuts every connection once it carried more than limit bytes in either
// direction: a transfer dropped mid-body.
type cutProxy struct {
	ln    net.Listener
	wg    stdsync.WaitGroup
	limit int64
	mu    stdsync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, upstream string, limit int64) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, limit: limit}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.serve(c, upstream)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		// Idle keep-alive connections would otherwise live until the
		// client's idle timeout.
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) serve(c net.Conn, upstream string) {
	defer c.Close()
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.CopyN(dst, src, p.limit)
		// Cut both sides: an abrupt end mid-body.
		c.Close()
		u.Close()
		done <- struct{}{}
	}
	go pipe(u, c)
	go pipe(c, u)
	<-done
	<-done
}

func TestTransfersCutMidBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tb, err := url.Parse(e.sb.ToolboxProxyURL)
	require.NoError(t, err)
	proxy := newCutProxy(t, tb.Host, 512<<10)
	cut := e.t
	cut.Sandbox.ToolboxProxyURL = "http://" + proxy.ln.Addr().String() + tb.Path

	host := t.TempDir()
	writeFile(t, filepath.Join(e.root, "small", "a.txt"), "a", 0o644)
	require.NoError(t, os.MkdirAll(filepath.Join(e.root, "big"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(e.root, "big", "blob"), randomBytes(t, 2<<20), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(host, "blob"), randomBytes(t, 2<<20), 0o644))

	// Outbound: the first operation fits, the second's download is cut.
	_, err = SyncOut(t.Context(), cut, []Operation{
		{ID: "1", Files: []Mapping{{SourcePath: e.root + "/small", TargetPath: filepath.Join(host, "small"), Kind: KindDirectory}}},
		{ID: "2", Files: []Mapping{{SourcePath: e.root + "/big", TargetPath: filepath.Join(host, "big"), Kind: KindDirectory}}},
	}, Options{})
	require.Error(t, err)
	assert.Equal(t, "a", readFile(t, filepath.Join(host, "small", "a.txt")), "earlier host files intact")
	assert.NoDirExists(t, filepath.Join(host, "big"))
	_, err = SyncOut(t.Context(), cut, []Operation{{ID: "3", Files: []Mapping{{SourcePath: e.root + "/big/blob", TargetPath: filepath.Join(host, "small", "a.txt"), Kind: KindFile}}}}, Options{})
	require.Error(t, err)
	assert.Equal(t, "a", readFile(t, filepath.Join(host, "small", "a.txt")), "not replaced by a partial file")

	// Inbound: the upload body is cut.
	_, err = SyncIn(t.Context(), cut, []Operation{{ID: "4", Files: []Mapping{{SourcePath: filepath.Join(host, "blob"), TargetPath: e.root + "/up/blob", Kind: KindFile}}}}, Options{})
	require.Error(t, err)
	assert.NoFileExists(t, filepath.Join(e.root, "up", "blob"))

	assert.Empty(t, hostScratchLeft(t, host))
	assert.Empty(t, e.scratchLeft(t), "scratch removed after every cut")
}
