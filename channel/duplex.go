package channel

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/daytonaworker/daytona-worker/internal/shell"
	"github.com/daytonaworker/daytona-worker/rpc"
)

// The duplex channel: a persistent byte stream to a command in the sandbox
// (the host's callback bridge). Daytona's session API has no stdin, so the
// command runs on a pseudo-terminal switched to raw mode: what the host
// writes reaches the program byte for byte, and what the program prints
// comes back byte for byte, with nothing of the shell around it.

// Host limits of a duplex route.
const (
	// MaxDuplexChunk is the largest chunk (decoded bytes) of one data frame
	// and of one write.
	MaxDuplexChunk = 262_144
	// MaxDuplexTotal is what one route may carry to the host in its life.
	MaxDuplexTotal = 256 << 20
	// DuplexLifetime is the longest a route lives.
	DuplexLifetime = time.Hour
	// MaxMalformedWrites is how many malformed writes a route survives.
	MaxMalformedWrites = 100
	// maxLaunchBytes bounds the launch command (argv, quoted).
	maxLaunchBytes = 32 << 10
)

// duplexState is the duplex-only part of a channel.
type duplexState struct {
	total     atomic.Int64
	malformed atomic.Int32
}

// duplexLaunch is the line typed into the terminal: the shell's stderr goes
// to a diagnostics file, the terminal switches to raw mode without echo,
// the ready marker is printed, and the program replaces the shell. The
// marker is written with printf octal escapes, so the terminal's echo of
// this line (cooked mode still) cannot contain it: everything before the
// marker (prompt, echo) is dropped, everything after it is the program's.
func duplexLaunch(argv []string, diagnostics, marker string) (string, error) {
	if len(argv) == 0 {
		//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
		return "", errors.New("The duplex channel launch command needs at least one argument.")
	}
	words := make([]string, len(argv))
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", rpc.InvalidParams("invalid params: command contains a NUL byte")
		}
		words[i] = shell.Quote(a)
	}
	var esc strings.Builder
	for i := 0; i < len(marker); i++ {
		fmt.Fprintf(&esc, `\%03o`, marker[i])
	}
	line := "exec 2>" + shell.Quote(diagnostics) + "; stty raw -echo; printf '" + esc.String() + "'; exec " + strings.Join(words, " ") + "\r"
	if len(line) > maxLaunchBytes {
		return "", rpc.InvalidParams("invalid params: the duplex channel command is longer than %d bytes", maxLaunchBytes)
	}
	return line, nil
}

func newMarker() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "PAPERCLIP-DUPLEX-READY-" + hex.EncodeToString(b)
}

func (h *Hub) duplexOpen(ctx context.Context, p rpc.DuplexOpenParams) (rpc.DuplexRoute, error) {
	if strings.TrimSpace(p.HostRouteID) == "" {
		return rpc.DuplexRoute{}, rpc.InvalidParams("invalid params: hostRouteId is required")
	}
	marker := newMarker()
	id := uuid.NewString()
	line, err := duplexLaunch(p.Command, "/tmp/paperclip-duplex-"+id+".log", marker)
	if err != nil {
		return rpc.DuplexRoute{}, err
	}
	la, err := h.resolve(Ref{p.DriverKey, p.CompanyID, p.EnvironmentID, p.ProviderLeaseID}, "duplex channel")
	if err != nil {
		return rpc.DuplexRoute{}, err
	}
	ds := &duplexState{}
	ch := &channel{h: h, la: la, hostRouteID: p.HostRouteID, sid: "duplex-" + id, n: rpc.NotifierFrom(ctx), dup: ds}
	ch.out = func(b []byte) bool { return ch.duplexData(ds, b) }
	ch.exit = func(code *int, transportClosed bool) {
		ch.notify(rpc.DuplexExitMethod, rpc.DuplexExit{HostRouteID: ch.hostRouteID, WorkerSessionID: ch.sid, ExitCode: code, TransportClosed: transportClosed})
	}
	if ch.n == nil {
		return rpc.DuplexRoute{}, rpc.ErrNotServing
	}
	if err := h.register(false, ch); err != nil {
		return rpc.DuplexRoute{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, openBound)
	defer cancel()
	err = ch.start(ctx, line, marker)
	if err == nil {
		err = ch.bindAfterReply(ctx, "duplex channel", DuplexLifetime)
	}
	if err != nil {
		h.unregister(false, ch, false)
		ch.end(context.Background())
		return rpc.DuplexRoute{}, err
	}
	return rpc.DuplexRoute{HostRouteID: ch.hostRouteID, WorkerSessionID: ch.sid}, nil
}

// start opens the terminal, types the launch line and waits for the ready
// marker; what follows the marker in the same read is the program's.
func (ch *channel) start(ctx context.Context, line, marker string) error {
	if err := ch.openTerm(ctx); err != nil {
		return err
	}
	// A blocked read ends with the open's bound.
	stop := context.AfterFunc(ctx, func() { _ = ch.conn.Close() })
	defer stop()
	if _, err := ch.conn.WriteContext(ctx, []byte(line)); err != nil {
		return err
	}
	want := []byte(marker)
	var seen []byte
	buf := make([]byte, readBuf)
	for {
		n, err := ch.conn.Read(buf)
		seen = append(seen, buf[:n]...)
		if i := bytes.Index(seen, want); i >= 0 {
			ch.leftover = append([]byte(nil), seen[i+len(want):]...)
			return nil
		}
		// Keep only a tail that could still begin the marker.
		if len(seen) > len(want) {
			seen = append(seen[:0], seen[len(seen)-len(want):]...)
		}
		if err != nil {
			if ctx.Err() != nil {
				//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
				return fmt.Errorf("Daytona duplex channel: the command did not start within %s", openBound)
			}
			//lint:ignore ST1005 protocol-facing message, the reference plugin's text (docs/behavior.md#errors)
			return errors.New("Daytona duplex channel: the terminal ended before the command started")
		}
	}
}

// duplexData forwards program output as base64 data frames, within the
// route's total; at the total the channel ends.
func (ch *channel) duplexData(ds *duplexState, b []byte) bool {
	left := MaxDuplexTotal - ds.total.Load()
	cut := int64(len(b)) > left
	if cut {
		b = b[:left]
	}
	for len(b) > 0 {
		n := min(len(b), MaxDuplexChunk)
		ch.notify(rpc.DuplexDataMethod, rpc.DuplexData{HostRouteID: ch.hostRouteID, WorkerSessionID: ch.sid,
			Chunk: base64.StdEncoding.EncodeToString(b[:n])})
		ds.total.Add(int64(n))
		b = b[n:]
	}
	return !cut
}

// duplexRoute returns the bound channel both ids name, or nil: writes and
// stops for any other pair are no-ops.
func (h *Hub) duplexRoute(hostRouteID, sid string) *channel {
	ch := h.get(false, hostRouteID)
	if ch == nil || ch.sid != sid || sid == "" {
		return nil
	}
	return ch
}

// decodeChannelBytes accepts only canonical padded standard base64 that
// is not empty: the text must re-encode to itself. too reports a payload
// over the write limit (checked before decoding all of it).
func decodeChannelBytes(s string) (b []byte, ok, too bool) {
	if len(s) > base64.StdEncoding.EncodedLen(MaxDuplexChunk) {
		return nil, false, true
	}
	if s == "" {
		return nil, false, false
	}
	// Strict padded decoding leaves one way to differ from the canonical
	// text: line breaks, which the decoder skips and the length betrays.
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) == 0 || base64.StdEncoding.EncodedLen(len(b)) != len(s) {
		return nil, false, false
	}
	return b, true, len(b) > MaxDuplexChunk
}

func (h *Hub) duplexWrite(_ context.Context, p rpc.DuplexWriteParams) (rpc.Continuation, error) {
	ch := h.duplexRoute(p.HostRouteID, p.WorkerSessionID)
	if ch == nil {
		return nil, nil
	}
	data, ok, too := decodeChannelBytes(p.Data)
	if too {
		// The host ends a route before it sends such a write: a peer that
		// does not is not trusted with the rest of the stream either.
		go ch.end(context.Background())
		return nil, rpc.InvalidParams("invalid params: a duplex write carries at most %d bytes", MaxDuplexChunk)
	}
	if !ok {
		if ch.dup.malformed.Add(1) > MaxMalformedWrites {
			go ch.end(context.Background())
		}
		return nil, rpc.InvalidParams("invalid params: data must be non-empty canonical padded base64")
	}
	return ch.enqueue(data)
}

func (h *Hub) duplexStop(_ context.Context, p rpc.DuplexRoute) (any, error) {
	if ch := h.duplexRoute(p.HostRouteID, p.WorkerSessionID); ch != nil {
		ch.kill()
	}
	return nil, nil
}

func (h *Hub) duplexClose(_ context.Context, p rpc.ChannelCloseParams) (rpc.DuplexCloseResult, error) {
	sid := h.closeRoute(false, p.HostRouteID)
	return rpc.DuplexCloseResult{HostRouteID: p.HostRouteID, WorkerSessionID: sid}, nil
}
