package sync

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/shell"
)

// Terminal framing of the disk-full fallbacks (docs/behavior.md#streaming-export; proposed framing,
// kept in this one place): the sandbox sends
//
//	D <seq> <base64 of at most 40960 bytes>\n   data
//	E <frames> <total bytes> <exit code>\n      end
//
// and the host answers every written data frame with "A <seq>\n" on the
// terminal input. The sender keeps at most 16 frames unacknowledged.
const (
	frameSize     = 40 << 10 // payload bytes per data frame
	maxPending    = 16       // unacknowledged frames
	maxFrameLine  = 64 << 10 // longest accepted output line
	maxPreamble   = 1 << 20  // terminal noise accepted before the ready marker
	readyMarker   = "PCRDY_"
	exitNoCanon   = 40
	exitIdentity  = 46 // the source changed identity during the stream
	sandboxPrereq = "Bash, GNU tar, dd, head and base64"
)

// termSender is the bash program the terminal runs: pre (checks that may
// call fail N), the producer (writes the payload to stdout) in a process
// substitution, the framing loop, then post (may change rc). It writes
// nothing to the sandbox filesystem: no archive, no log.
func termSender(pre, producer, post string) string {
	return `exec 2>/dev/null
set -u
fail() { printf 'E 0 0 %d\n' "$1"; exit 0; }
` + pre + `
exec 3< <(set -o pipefail; { ` + producer + `; } | base64 -w0)
ppid=$!
seq=0 total=0 pending=0 acked=0
ack() {
  IFS=' ' read -r k a || exit 70
  [ "$k" = A ] && [ "$a" = "$acked" ] || exit 71
  acked=$((acked+1)); pending=$((pending-1))
}
# One long-lived base64 encoder; head -c never reads past its count, so
# each frame is exactly 54612 characters (40959 bytes) until the last.
while :; do
  b=$(head -c 54612 <&3)
  [ -n "$b" ] || break
  n=$(( ${#b} / 4 * 3 ))
  case "$b" in *==) n=$((n-2));; *=) n=$((n-1));; esac
  printf 'D %d %s\n' "$seq" "$b"
  seq=$((seq+1)); total=$((total+n)); pending=$((pending+1))
  while [ "$pending" -ge 16 ]; do ack; done
done
wait "$ppid"; rc=$?
exec 3<&-
` + post + `
printf 'E %d %d %d\n' "$seq" "$total" "$rc"
while [ "$pending" -gt 0 ]; do ack; done
exit 0
`
}

// termCanonPrelude is canonPrelude for the terminal: failures are reported
// in an end frame instead of an exit status.
func termCanonPrelude(root string) string {
	return `if command -v realpath >/dev/null 2>&1; then canon() { realpath -e -- "$1"; }
elif command -v readlink >/dev/null 2>&1; then canon() { readlink -f -- "$1"; }
else fail 40; fi
root=$(canon ` + shell.Quote(root) + `) || fail 41
[ -n "$root" ] || fail 41
inroot() { case "$1" in "$root"|"$root"/*) return 0;; *) return 1;; esac; }
`
}

// termCanonSource is canonSource for the terminal: $s, or an end frame
// with 42.
func termCanonSource(src string) string {
	return "s=$(canon " + shell.Quote(src) + ") || fail 42\ninroot \"$s\" || fail 42\n"
}

// termStream is one terminal-streamed transfer.
type termStream struct {
	t      Target
	o      Options
	limit  int64              // running-total cap (sandbox disk allocation); 0 = none
	sink   func([]byte) error // in-order host write of one decoded frame
	done   func(ok bool)      // host side finished: close files before cleanup
	script string
	// stopped, if set, is closed when the stream aborts, so a sink blocked
	// on a slow host write can give up.
	stopped chan struct{}
}

// run streams and returns the payload size and the sender's exit code. The
// host side is released (done) before terminal cleanup begins, and cleanup
// gives up after Options.CleanupTimeout (5 s).
func (s *termStream) run(ctx context.Context) (total int64, rc int, err error) {
	id := "paperclip-sync-" + uuid.NewString()
	doneCalled := false
	finish := func(ok bool) {
		if !doneCalled {
			doneCalled = true
			s.done(ok)
		}
	}
	created := false
	// Release the host side first, then clean up the terminal: cleanup
	// (bounded by its own limit) never runs while a host file is open.
	defer func() {
		finish(false)
		if created {
			s.cleanup(ctx, id)
		}
	}()
	if _, _, err := s.t.Client.PTY.Create(ctx, s.t.Sandbox, &daytona.PTYCreateRequest{
		ID: id, Cwd: s.t.Root, Cols: 120, Rows: 30, LazyStart: true,
		Envs: map[string]string{"LC_ALL": "C", "HISTFILE": "/dev/null"},
	}); err != nil {
		return 0, 0, &StreamError{Msg: "opening the terminal", Err: err}
	}
	created = true
	conn, err := s.t.Client.PTY.Connect(ctx, s.t.Sandbox, id)
	if err != nil {
		return 0, 0, &StreamError{Msg: "attaching to the terminal", Err: err}
	}
	defer conn.Close()
	// A blocked Read ends when ctx does.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	tok := uuid.NewString()
	// The interactive shell is in cooked mode: keep the typed line short,
	// switch to raw mode, announce readiness (the echo of this line cannot
	// contain the marker: printf assembles it), then read the program
	// byte-exactly from the now raw terminal and exec it.
	line := fmt.Sprintf("unset HISTFILE; stty raw -echo && printf '%s%%s\\n' %s && exec bash --noprofile --norc -c \"$(head -c %d)\"\r", readyMarker, tok, len(s.script))
	if _, err := conn.WriteContext(ctx, []byte(line)); err != nil {
		return 0, 0, &StreamError{Msg: "starting the sender", Err: err}
	}
	br := bufio.NewReaderSize(conn, maxFrameLine+256)
	marker := []byte(readyMarker + tok)
	seen := 0
	for {
		l, err := br.ReadSlice('\n')
		seen += len(l)
		if bytes.Contains(l, marker) {
			break
		}
		if err != nil && err != bufio.ErrBufferFull {
			return 0, 0, s.fail(ctx, "terminal closed before the sender started", err)
		}
		if seen > maxPreamble {
			return 0, 0, &StreamError{Msg: "no ready marker from the terminal"}
		}
	}
	if _, err := conn.WriteContext(ctx, []byte(s.script)); err != nil {
		return 0, 0, &StreamError{Msg: "sending the sender program", Err: err}
	}

	// Writer: host writes in frame order, then the acknowledgement.
	type chunk struct {
		seq int64
		buf []byte
	}
	pool := make(chan []byte, maxPending+1)
	for range maxPending + 1 {
		pool <- make([]byte, frameSize)
	}
	work := make(chan chunk, maxPending+1)
	var acked atomic.Int64
	werr := make(chan error, 1)
	go func() {
		for c := range work {
			if err := s.sink(c.buf); err != nil {
				// Stop the reader too: the sender waits for acks that
				// will never come.
				conn.Close()
				werr <- err
				for range work {
				}
				return
			}
			pool <- c.buf[:cap(c.buf)]
			// Counted before it is sent: the sender's next frame may
			// arrive as soon as the ack is out, and the reader must not
			// see it before the ack it answers (a goroutine switch after
			// the write made that a spurious "exceeded 16 unacknowledged
			// frames" on a busy machine).
			acked.Add(1)
			if _, err := conn.WriteContext(ctx, []byte("A "+strconv.FormatInt(c.seq, 10)+"\n")); err != nil {
				werr <- &StreamError{Msg: "acknowledging a frame", Err: err}
				for range work {
				}
				return
			}
		}
		werr <- nil
	}()
	workOpen := true
	endWork := func() error {
		if workOpen {
			close(work)
			workOpen = false
		}
		return <-werr
	}
	abort := func(e error) (int64, int, error) {
		if s.stopped != nil {
			close(s.stopped)
		}
		conn.Close() // unblocks a writer stuck on the terminal
		if werr := endWork(); werr != nil && !errors.Is(werr, ErrStream) {
			e = werr // the host-side cause (reserve, refused member, disk)
		}
		return total, 0, e
	}

	var received int64
	for {
		l, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return abort(&StreamError{Msg: "oversized terminal line"})
		}
		if err != nil {
			if ctx.Err() != nil {
				return abort(&StreamError{Msg: "transfer timed out or was cancelled", Err: ctx.Err()})
			}
			return abort(s.fail(ctx, "terminal closed before the end frame", err))
		}
		l = l[:len(l)-1]
		switch {
		case bytes.HasPrefix(l, []byte("D ")):
			f := bytes.SplitN(l[2:], []byte(" "), 2)
			if len(f) != 2 {
				return abort(&StreamError{Msg: "malformed data frame"})
			}
			seq, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil || seq != received {
				return abort(&StreamError{Msg: fmt.Sprintf("frame sequence gap (want %d)", received)})
			}
			if len(f[1]) > base64.StdEncoding.EncodedLen(frameSize) {
				return abort(&StreamError{Msg: "oversized data frame"})
			}
			received++
			if received-acked.Load() > maxPending {
				return abort(&StreamError{Msg: "sender exceeded 16 unacknowledged frames"})
			}
			var buf []byte
			select {
			case buf = <-pool:
			case <-ctx.Done():
				return abort(&StreamError{Msg: "transfer timed out or was cancelled", Err: ctx.Err()})
			}
			n, err := base64.StdEncoding.Decode(buf, f[1])
			if err != nil {
				return abort(&StreamError{Msg: "undecodable data frame", Err: err})
			}
			total += int64(n)
			if s.limit > 0 && total > s.limit {
				return abort(&StreamError{Msg: fmt.Sprintf("stream exceeds the sandbox disk allocation (%d bytes)", s.limit)})
			}
			work <- chunk{seq, buf[:n]}
		case bytes.HasPrefix(l, []byte("E ")):
			var frames, size int64
			var code int
			if _, err := fmt.Sscanf(string(l), "E %d %d %d", &frames, &size, &code); err != nil {
				return abort(&StreamError{Msg: "malformed end frame"})
			}
			if frames != received || size != total {
				return abort(&StreamError{Msg: fmt.Sprintf("end frame mismatch: %d frames/%d bytes sent, %d/%d received", frames, size, received, total)})
			}
			if err := endWork(); err != nil {
				return total, 0, err
			}
			finish(true)
			return total, code, nil
		default:
			return abort(&StreamError{Msg: "unexpected terminal output"})
		}
	}
}

// fail reports an early terminal end, naming the prerequisites when the
// sender exited at once.
func (s *termStream) fail(_ context.Context, msg string, err error) error {
	if err == io.EOF {
		return &StreamError{Msg: msg + " (the sandbox needs " + sandboxPrereq + ")"}
	}
	return &StreamError{Msg: msg, Err: err}
}

// cleanup kills the terminal with its own bounded budget (docs/behavior.md#streaming-export): it runs
// after the host side was released, and gives up after the limit.
func (s *termStream) cleanup(ctx context.Context, id string) {
	cctx, cancel := cleanupContext(ctx, s.o.cleanupTimeout())
	defer cancel()
	_, _ = s.t.Client.PTY.Kill(cctx, s.t.Sandbox, id)
}

// diskAllocation is the docs/behavior.md#streaming-export cap.
func (t Target) diskAllocation(ctx context.Context) int64 {
	if t.DiskAllocation > 0 {
		return t.DiskAllocation
	}
	sb, _, err := t.Client.Sandboxes.Get(ctx, t.Sandbox.ID)
	if err != nil || sb.Disk <= 0 {
		return 0
	}
	return int64(sb.Disk * (1 << 30))
}

// sparseSink writes frames to a host file, seeking over zero frames.
type sparseSink struct {
	f       *os.File
	size    int64
	hole    bool
	reserve func(int) error
}

func (w *sparseSink) write(b []byte) error {
	if w.reserve != nil {
		if err := w.reserve(len(b)); err != nil {
			return err
		}
	}
	if allZero(b) {
		if _, err := w.f.Seek(int64(len(b)), io.SeekCurrent); err != nil {
			return err
		}
		w.hole = true
	} else {
		if _, err := w.f.Write(b); err != nil {
			return err
		}
		w.hole = false
	}
	w.size += int64(len(b))
	return nil
}

func (w *sparseSink) close() error {
	if w.hole {
		return w.f.Truncate(w.size)
	}
	return nil
}
