package testenv

import (
	"context"
	"encoding/binary"
	"io"
	"net"
)

// OfflineResolver is a resolver that never leaves this process: every query
// is answered NXDOMAIN over an in-memory pipe, so a test of an unresolvable
// host makes no DNS traffic and cannot be answered by the network.
func OfflineResolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go answerNXDOMAIN(server)
		return client, nil
	}}
}

// answerNXDOMAIN answers DNS over a stream (a 2-byte length, then the
// message) until the client goes away: each query comes back as a response
// with rcode NXDOMAIN.
func answerNXDOMAIN(server net.Conn) {
	defer server.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(server, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(server, q); err != nil || len(q) < 12 {
			return
		}
		q[2] |= 0x80    // a response
		q[3] = 0x80 | 3 // NXDOMAIN
		if _, err := server.Write(append(n[:], q...)); err != nil {
			return
		}
	}
}
