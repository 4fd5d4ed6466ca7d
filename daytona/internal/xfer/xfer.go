// Package xfer holds helpers for the daytona client's transfer tests and
// benchmarks: a deterministic byte source that holds no data, and a raw
// loopback TCP copy used as the throughput ceiling the client is compared
// with. It is internal to the daytona package tree and used only by tests.
package xfer

import (
	"hash/crc32"
	"io"
	"net"
	"time"
)

// period is prime so the pattern does not align with buffer sizes.
const period = 65521

var block = func() []byte {
	b := make([]byte, period)
	for i := range b {
		b[i] = byte(i*7 + i>>11)
	}
	return b
}()

// Pattern yields N deterministic bytes without holding them.
type Pattern struct {
	N   int64
	off int64
}

// NewPattern returns a reader of n pattern bytes.
func NewPattern(n int64) *Pattern { return &Pattern{N: n} }

// Read implements io.Reader.
func (p *Pattern) Read(b []byte) (int, error) {
	if p.off >= p.N {
		return 0, io.EOF
	}
	if int64(len(b)) > p.N-p.off {
		b = b[:p.N-p.off]
	}
	n := 0
	for n < len(b) {
		i := int((p.off + int64(n)) % period)
		n += copy(b[n:], block[i:])
	}
	p.off += int64(n)
	return n, nil
}

// CRC returns the CRC-32 (IEEE) of the first n pattern bytes.
func CRC(n int64) uint32 {
	h := crc32.NewIEEE()
	_, _ = io.Copy(h, NewPattern(n))
	return h.Sum32()
}

// RawLoopback sends n bytes up and then n bytes down over one plain
// loopback TCP connection and returns how long that took.
func RawLoopback(n int64) (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	errc := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer conn.Close()
		if _, err := io.CopyN(io.Discard, conn, n); err != nil {
			errc <- err
			return
		}
		_, err = io.Copy(conn, NewPattern(n))
		errc <- err
	}()
	start := time.Now()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		<-errc
		return 0, err
	}
	defer conn.Close()
	if _, err := io.Copy(conn, NewPattern(n)); err != nil {
		return 0, err
	}
	if _, err := io.CopyN(io.Discard, conn, n); err != nil {
		return 0, err
	}
	if err := <-errc; err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// BestRawLoopback is the fastest of tries RawLoopback runs.
func BestRawLoopback(n int64, tries int) (time.Duration, error) {
	var best time.Duration
	for range tries {
		d, err := RawLoopback(n)
		if err != nil {
			return 0, err
		}
		if best == 0 || d < best {
			best = d
		}
	}
	return best, nil
}
