package daytonatest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shapedPair listens through a netListener shaped by nw and returns the
// client's connection and the server's.
func shapedPair(t *testing.T, nw Network) (client, server net.Conn, ln *netListener) {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln = newNetListener(tcp, nw, new(atomic.Int64))
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	client, err = net.Dial("tcp", tcp.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	server = <-accepted
	require.NotNil(t, server)
	t.Cleanup(func() { _ = server.Close() })
	return client, server, ln
}

// TestShapedBytesIntactBothWays: megabytes each way, written in pieces of
// odd sizes while the other side reads, arrive whole and in order, and
// the server's writes do not wait for the delay.
func TestShapedBytesIntactBothWays(t *testing.T) {
	client, server, _ := shapedPair(t, Network{RTT: 20 * time.Millisecond})
	up, down := make([]byte, 3<<20+17), make([]byte, 5<<20+3)
	_, _ = rand.Read(up)
	_, _ = rand.Read(down)
	write := func(c net.Conn, b []byte) <-chan error {
		done := make(chan error, 1)
		go func() {
			for len(b) > 0 {
				n := min(len(b), 1+len(b)%70001)
				if _, err := c.Write(b[:n]); err != nil {
					done <- err
					return
				}
				b = b[n:]
			}
			done <- nil
		}()
		return done
	}
	read := func(c net.Conn, n int) <-chan []byte {
		got := make(chan []byte, 1)
		go func() {
			b := make([]byte, n)
			_, err := io.ReadFull(c, b)
			assert.NoError(t, err)
			got <- b
		}()
		return got
	}
	gotUp, gotDown := read(server, len(up)), read(client, len(down))
	wUp, wDown := write(client, up), write(server, down)
	require.NoError(t, <-wUp)
	require.NoError(t, <-wDown)
	assert.True(t, bytes.Equal(up, <-gotUp), "client to server")
	assert.True(t, bytes.Equal(down, <-gotDown), "server to client")
}

// TestShapedDelays: a new connection's first bytes reach the server no
// sooner than one round trip (the handshake) and a half after the
// connect; a reply takes half a round trip more; and a server write
// returns before the reply arrives (it is queued, not held). Lower bounds
// only: a loaded machine can only make it later.
func TestShapedDelays(t *testing.T) {
	const rtt = 80 * time.Millisecond
	start := time.Now()
	client, server, _ := shapedPair(t, Network{RTT: rtt})
	_, err := client.Write([]byte("ping"))
	require.NoError(t, err)
	b := make([]byte, 4)
	_, err = io.ReadFull(server, b)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), rtt+rtt/2, "handshake and half a round trip")
	wrote := make(chan time.Time, 1)
	go func() {
		_, err := server.Write([]byte("pong"))
		assert.NoError(t, err)
		wrote <- time.Now()
	}()
	sent := time.Now()
	_, err = io.ReadFull(client, b)
	require.NoError(t, err)
	arrived := time.Now()
	assert.Equal(t, "pong", string(b))
	assert.GreaterOrEqual(t, arrived.Sub(sent), rtt/2)
	assert.True(t, (<-wrote).Before(arrived), "the write was queued, not held for the delay")

	// Warm: a request and its reply cost one round trip.
	sent = time.Now()
	_, err = client.Write([]byte("ping"))
	require.NoError(t, err)
	_, err = io.ReadFull(server, b)
	require.NoError(t, err)
	_, err = server.Write([]byte("pong"))
	require.NoError(t, err)
	_, err = io.ReadFull(client, b)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(sent), rtt)
}

// TestShapedBandwidth: N bytes take at least N/Bandwidth in each
// direction.
func TestShapedBandwidth(t *testing.T) {
	const bw = 4 << 20
	const n = 1 << 20 // a quarter of a second at bw
	client, server, _ := shapedPair(t, Network{Bandwidth: bw})
	for _, dir := range []struct {
		name     string
		from, to net.Conn
	}{{"up", client, server}, {"down", server, client}} {
		start := time.Now()
		go func() { _, _ = dir.from.Write(make([]byte, n)) }()
		_, err := io.ReadFull(dir.to, make([]byte, n))
		require.NoError(t, err, dir.name)
		assert.GreaterOrEqual(t, time.Since(start), time.Duration(n)*time.Second/bw, dir.name)
	}
}

// TestShapedClose: the server's close reaches the client after the bytes
// before it, the client's close reaches the server as EOF, and a closed
// listener cuts a connection still delivering at once.
func TestShapedClose(t *testing.T) {
	client, server, _ := shapedPair(t, Network{RTT: 10 * time.Millisecond})
	_, err := server.Write([]byte("bye"))
	require.NoError(t, err)
	require.NoError(t, server.Close())
	b, err := io.ReadAll(client)
	require.NoError(t, err)
	assert.Equal(t, "bye", string(b))

	client, server, _ = shapedPair(t, Network{RTT: 10 * time.Millisecond})
	require.NoError(t, client.Close())
	_, err = io.ReadAll(server)
	require.NoError(t, err, "EOF")

	client, server, ln := shapedPair(t, Network{RTT: time.Hour})
	_, err = server.Write([]byte("never"))
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	_ = client.SetReadDeadline(time.Now().Add(time.Minute))
	b, err = io.ReadAll(client)
	assert.Empty(t, b, "cut, not delivered")
	var ne net.Error
	if errors.As(err, &ne) {
		assert.False(t, ne.Timeout(), "cut at once, not left to the read deadline: %v", err)
	}
}
