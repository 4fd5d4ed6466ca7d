package exec

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strconv"
)

// endMarker is the per-command proof of completion on the session path
// (docs/exec.md#end-markers). The wrapped command prints, right after the
// command's own output and with no newline before it, the token and the
// exit status on stdout ("<token>=<status>\n") and the token on stderr
// ("<token>\n"). The daemon records a stream's bytes in order, so a log
// that holds both markers holds all the foreground output and the exit
// status: no status read, no second snapshot, no wait for the follow
// socket's close. Because the marker ends the last line, a newline the
// daemon appends to an unterminated line never happens, and the bytes
// before the marker are exactly the command's.
//
// The token is 0x1F and 32 random hex digits (128 bits, new per command),
// so the command cannot guess it and output that merely looks like a
// marker (a prefix, another token) is output. The script text carries the
// digits in two halves that printf joins, so a shell that echoes its input
// or traces its commands (set -v, set -x left on in the session) never
// prints the whole token.
type endMarker struct {
	tok          []byte
	half1, half2 string
}

const markerLead = 0x1f // unit separator: never a byte a marker prefix hides often

func newEndMarker() endMarker {
	var r [16]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails (it panics instead)
	h := hex.EncodeToString(r[:])
	return endMarker{tok: append([]byte{markerLead}, h...), half1: h[:16], half2: h[16:]}
}

// wrap runs script in a subshell (a top-level exit cannot end the session
// shell) inside a second one that prints the markers and exits with the
// script's status, so the daemon records the command's own exit code for
// the status read (the fallback evidence) and the session shell keeps no
// variable of ours.
func (m endMarker) wrap(script string) string {
	return "( ( " + script + ` ); s=$?; printf '\037%s%s=%d\n' ` + m.half1 + " " + m.half2 + ` "$s"; printf '\037%s%s\n' ` +
		m.half1 + " " + m.half2 + ` >&2; exit "$s" )`
}

// scanMarker takes the next accepted bytes of stream i (0 stdout, 1
// stderr) and returns what of them is the command's output, now: the
// bytes before the marker once it is seen, and otherwise all but a tail
// that could be the start of the marker (b.held, kept until the next bytes
// decide). After the marker nothing more is the command's (a background
// process it left running may still write; that is not waited for).
func scanMarker(b *streamBuf, tok []byte, stdout bool, data []byte) []byte {
	if b.ended {
		return nil
	}
	buf := data
	if len(b.held) > 0 {
		buf = append(b.held, data...)
		b.held = nil
	}
	from := 0
	for {
		i := bytes.Index(buf[from:], tok)
		if i < 0 {
			break
		}
		i += from
		if !stdout {
			b.ended = true
			return buf[:i]
		}
		code, complete, valid := parseStatus(buf[i+len(tok):])
		switch {
		case valid && complete:
			b.ended, b.code = true, code
			return buf[:i]
		case valid:
			b.held = append([]byte(nil), buf[i:]...)
			return buf[:i]
		}
		from = i + 1 // the token without a status after it: output
	}
	if k := markerPrefixLen(buf[from:], tok); k > 0 {
		b.held = append([]byte(nil), buf[len(buf)-k:]...)
		return buf[:len(buf)-k]
	}
	return buf
}

// parseStatus reads "=<digits>\n" at the start of p: valid says p is such
// a line or the start of one, complete that it is whole.
func parseStatus(p []byte) (code int, complete, valid bool) {
	const maxDigits = 10
	if len(p) == 0 {
		return 0, false, true
	}
	if p[0] != '=' {
		return 0, false, false
	}
	for j := 1; j < len(p) && j <= maxDigits+1; j++ {
		switch c := p[j]; {
		case c == '\n' && j > 1:
			n, err := strconv.Atoi(string(p[1:j]))
			return n, err == nil, err == nil
		case c < '0' || c > '9':
			return 0, false, false
		}
	}
	return 0, false, len(p) <= maxDigits+1
}

// markerPrefixLen is the length of the longest tail of p that is a proper
// prefix of tok. The token holds its lead byte only once, so such a tail
// starts at the last lead byte of p.
func markerPrefixLen(p, tok []byte) int {
	w := p[max(0, len(p)-len(tok)+1):]
	j := bytes.LastIndexByte(w, markerLead)
	if j < 0 || !bytes.HasPrefix(tok, w[j:]) {
		return 0
	}
	return len(w) - j
}
