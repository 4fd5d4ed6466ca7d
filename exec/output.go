package exec

import (
	"bytes"
	"fmt"
	"strings"
	stdsync "sync"
	"time"
	"unicode/utf8"
)

// DefaultOutputCap is the default per-stream limit of a result, in
// characters as the host counts them in the response frame: UTF-16 code
// units of the JSON-escaped text (a control character costs 6, `"` 2, an
// astral character 2; `<`, `>`, `&`, U+2028/9 are counted as 6 because
// encoding/json may escape them). Two capped streams plus the markers stay
// far below the host's 128 Mi-character frame, and worker memory per
// execute stays bounded (at most ~3 bytes of UTF-8 per unit and stream)
// whatever the command prints.
const DefaultOutputCap = 32 << 20

// maxSinkChunk bounds one Sink call in bytes; the host accepts chunks of
// at most 1 000 000 characters and a UTF-8 byte count is never below the
// UTF-16 length.
const maxSinkChunk = 512 << 10

// Stream names as the Sink receives them.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// truncationMarker ends a stream cut at the cap; it is part of both the
// live output and the final result, so the streamed text stays a prefix.
// It states what was kept, in characters (Unicode code points) of the text
// before it: the cap itself is counted in host units (see
// DefaultOutputCap), which a reader of the result cannot see, so quoting
// the cap would overstate the kept text whenever it holds escapes or
// non-ASCII characters.
func truncationMarker(stream string, kept int64) string {
	return fmt.Sprintf("\n[daytona-worker: %s truncated after %d characters; further output was discarded]\n", stream, kept)
}

// streamBuf is one stream's state: raw bytes accepted so far (the
// per-stream byte offset used to drop replays), an incomplete UTF-8 tail
// that is withheld until its continuation arrives, and the decoded text.
type streamBuf struct {
	name    string
	recv    int64  // raw bytes accepted (offset space of the log)
	lines   int64  // newlines among them (what the plan's labeler cost counts)
	pending []byte // incomplete UTF-8 sequence (< 4 bytes)
	text    strings.Builder
	cost    int64 // host characters of text (JSON-escaped UTF-16 units)
	chars   int64 // code points of text (what the truncation marker reports)
	capped  bool
	dropped int64 // raw bytes discarded beyond the cap
	sent    int   // bytes of text handed to the sink

	// End marker (marker.go): a tail that may start it, whether it was
	// seen, and the exit status and run time it carried (stdout).
	held  []byte
	ended bool
	// crossed: a marker of the other stream came on this one (the log
	// split a line at a label run in the output).
	crossed bool
	code    int
	run     time.Duration
	timed   bool
}

// output demultiplexed per stream, deduplicated by byte offset and
// forwarded live to a Sink. Callbacks of an abandoned follow connection are
// ignored by generation. All methods are safe for concurrent use; the Sink
// is called under the lock, so its calls are strictly ordered and all
// complete before the result is built.
type output struct {
	mu      stdsync.Mutex
	streams [2]*streamBuf
	sink    Sink
	sinkErr error
	limit   int64
	gen     uint64
	// sinkChars counts characters handed to the sink (for metadata).
	sinkChars int64
	// marker is the command's end-marker token (nil: no markers, e.g. the
	// one-shot path).
	marker []byte
	// files: the bytes come from the files path's files, not the log.
	files bool
	// quiet: the command has ended (a marker was seen, or its exit was
	// read), so nothing more goes to the sink; the result still gets all.
	quiet bool
}

func newOutput(sink Sink, limit int64) *output {
	if limit <= 0 {
		limit = DefaultOutputCap
	}
	return &output{
		streams: [2]*streamBuf{{name: StreamStdout}, {name: StreamStderr}},
		sink:    sink,
		limit:   limit,
	}
}

// nextGen starts a new connection generation: feeds tagged with an older
// generation are dropped from now on.
func (o *output) nextGen() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gen++
	return o.gen
}

// feed places data at byte offset off of stream (0 stdout, 1 stderr) and
// forwards the new text live. Bytes below what was already accepted are a
// replay and are dropped; a chunk starting beyond it (a gap) is dropped
// too, the next snapshot fills it. It reports false if gen is stale.
func (o *output) feed(gen uint64, stream int, off int64, data []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if gen != o.gen {
		return false
	}
	o.feedLocked(stream, off, data)
	o.liveLocked()
	return true
}

// feedQuiet is feed without live output: a snapshot is read whole before
// its text may go live (publish), because a snapshot that ends with the
// markers belongs to a command that has already ended.
func (o *output) feedQuiet(gen uint64, stream int, off int64, data []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if gen == o.gen {
		o.feedLocked(stream, off, data)
	}
}

// useMarker makes the output look for the command's end markers.
func (o *output) useMarker(tok []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.marker = tok
}

// ended reports the exit status carried by the end markers once both
// streams have shown theirs: the output is then complete.
func (o *output) ended() (code int, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streams[0].code, o.streams[0].ended && o.streams[1].ended
}

// runTime reports the command's run time by the shell's clock, once both
// end markers are in and the stdout one carried it.
func (o *output) runTime() (time.Duration, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.streams[0]
	return s.run, s.timed && s.ended && o.streams[1].ended
}

// publish forwards text not yet sent live, unless the command has ended.
func (o *output) publish() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.liveLocked()
}

// stopLive ends live output: the command's exit is known, what arrives
// from now on goes to the result only.
func (o *output) stopLive() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.quiet = true
}

func (o *output) feedLocked(stream int, off int64, data []byte) {
	b := o.streams[stream]
	end := off + int64(len(data))
	if end <= b.recv || off > b.recv {
		return
	}
	data = data[b.recv-off:]
	b.recv = end
	b.lines += int64(bytes.Count(data, newline))
	if o.marker != nil {
		if o.files && !b.crossed && unloggable(data) {
			b.crossed = true // the log would garble this output
		}
		data = scanMarker(b, o.streams[1-stream], o.marker, stream == 0, data)
		if b.ended {
			o.quiet = true // the command has ended: no more live output
		}
		if len(data) == 0 {
			return
		}
	}
	if b.capped {
		b.dropped += int64(len(data))
		return
	}
	var p []byte
	if len(b.pending) > 0 {
		p = append(b.pending, data...)
		b.pending = nil
	} else {
		p = data
	}
	o.decodeLocked(b, p, false)
}

// decodeLocked appends the complete characters of p to the stream's text
// (invalid bytes become U+FFFD, one per byte, exactly as decoding the whole
// stream at once would), withholds an incomplete trailing sequence unless
// final and applies the cap.
func (o *output) decodeLocked(b *streamBuf, p []byte, final bool) {
	start := b.text.Len()
	if b.text.Cap()-start < len(p) {
		// Grow by doubling (Builder.Grow) rather than by append's smaller
		// steps for large buffers: a big result is then copied a few times
		// instead of dozens and leaves far less garbage behind (a result
		// capped at 32 Mi: peak live heap 60 instead of 94 MiB, peak RSS
		// 77 instead of 120-133 MiB; BenchmarkOneShotPeakMemory).
		b.text.Grow(len(p))
	}
	i := 0
	for i < len(p) {
		// Fast path: a run of plain ASCII (one host character each) is
		// counted and copied at once; the loop below handles everything
		// else rune by rune. Output is mostly such runs.
		if j := i + plainRun(p[i:]); j > i {
			n := min(int64(j-i), max(0, o.limit-b.cost))
			b.text.Write(p[i : i+int(n)])
			b.cost += n
			b.chars += n
			i += int(n)
			if i < j { // the cap falls inside the run
				b.capped = true
				b.dropped += int64(len(p) - i)
				i = len(p)
				b.text.WriteString(truncationMarker(b.name, b.chars))
				break
			}
			continue
		}
		if !final && !utf8.FullRune(p[i:]) {
			break
		}
		r, size := utf8.DecodeRune(p[i:])
		c := hostCost(r)
		if b.cost+c > o.limit {
			b.capped = true
			b.dropped += int64(len(p) - i)
			i = len(p)
			b.text.WriteString(truncationMarker(b.name, b.chars))
			break
		}
		b.cost += c
		b.chars++
		if r == utf8.RuneError && size == 1 {
			b.text.WriteString("\uFFFD")
		} else {
			b.text.Write(p[i : i+size])
		}
		i += size
	}
	if i < len(p) {
		b.pending = append([]byte(nil), p[i:]...)
	}
}

// liveLocked forwards each stream's text not yet sent, while the command
// runs.
func (o *output) liveLocked() {
	if o.quiet {
		return
	}
	for _, b := range o.streams {
		if n := b.text.Len(); n > b.sent {
			o.emitLocked(b.name, b.text.String()[b.sent:])
			b.sent = n
		}
	}
}

// finish publishes withheld bytes after a confirmed exit: the stream is
// complete, so an incomplete sequence is genuine and becomes U+FFFD, and
// a tail held back as a possible marker start is output (no marker came).
func (o *output) finish() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gen++ // nothing may change the result from now on
	for _, b := range o.streams {
		p := append(b.pending, b.held...)
		b.pending, b.held = nil, nil
		if len(p) > 0 && !b.capped {
			o.decodeLocked(b, p, true)
		}
	}
	o.liveLocked()
}

// emitLocked forwards text in chunks of at most maxSinkChunk bytes, never
// splitting a character. A failing sink stops live output; the result is
// unaffected.
func (o *output) emitLocked(stream, text string) {
	if o.sink == nil || o.sinkErr != nil {
		return
	}
	for len(text) > 0 {
		n := len(text)
		if n > maxSinkChunk {
			n = maxSinkChunk
			for n > 0 && !utf8.RuneStart(text[n]) {
				n--
			}
		}
		if err := o.sink(stream, text[:n]); err != nil {
			o.sinkErr = err
			return
		}
		o.sinkChars += int64(n)
		text = text[n:]
	}
}

// snapshot returns the text so far and whether any stream was truncated.
func (o *output) snapshot() (stdout, stderr string, truncated bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streams[0].text.String(), o.streams[1].text.String(), o.streams[0].capped || o.streams[1].capped
}

// received reports the raw bytes accepted so far, both streams together.
func (o *output) received() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streams[0].recv + o.streams[1].recv
}

// fromFiles notes that the bytes come from the files path's files.
func (o *output) fromFiles() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.files = true
}

// unloggable reports whether p holds bytes the daemon's log cannot carry:
// NUL, or a label run. (A run split between two reads is not seen.)
func unloggable(p []byte) bool {
	return bytes.IndexByte(p, 0) >= 0 || bytes.Contains(p, labelOut) || bytes.Contains(p, labelErr)
}

var labelOut, labelErr = []byte{1, 1, 1}, []byte{2, 2, 2}

// garbled reports whether the daemon's log split the output at a label
// run (a marker came on the other stream), or the files path's output
// holds bytes the log would lose or split.
func (o *output) garbled() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streams[0].crossed || o.streams[1].crossed
}

// receivedLines reports the newlines among the bytes received.
func (o *output) receivedLines() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streams[0].lines + o.streams[1].lines
}

var newline = []byte{'\n'}

// bothCapped: no further output can change the result, so snapshots that
// only serve output reconciliation can be skipped.
func (o *output) bothCapped() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streams[0].capped && o.streams[1].capped
}

// hostCost is the number of characters r occupies in the JSON frame as
// the host measures it (UTF-16 code units after escaping), conservatively.
// plainRun is the length of the prefix of p made of bytes that are one
// host character each and need no escaping: printable ASCII other than
// '"', '\\', '<', '>' and '&' (see hostCost).
func plainRun(p []byte) int {
	for i, c := range p {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return i
		}
	}
	return len(p)
}

func hostCost(r rune) int64 {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
		return 2
	case r < 0x20, r == '<', r == '>', r == '&', r == 0x2028, r == 0x2029:
		return 6
	case r >= 0x10000:
		return 2
	}
	return 1
}
