package exec

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/daytonaworker/daytona-worker/internal/shell"
)

// endMarker is the per-command proof of completion on the session path
// (docs/exec.md#end-markers). The wrapped command prints, right after the
// command's own output and with no newline before it, the token, the exit
// status and the shell's clock before and after the command on stdout
// ("<token>=<status>;<start>;<end>\n") and the token on stderr
// ("<token>\n"). The daemon records a stream's bytes in order, so a log
// that holds both markers holds all the foreground output and the exit
// status: no status read, no second snapshot, no wait for the follow
// socket's close. Because the marker ends the last line, a newline the
// daemon appends to an unterminated line never happens, and the bytes
// before the marker are exactly the command's. The two clock readings
// (bash's $EPOCHREALTIME; empty in a shell without it) give the command's
// run time, from which the runner learns when to make a later command's
// first log read (docs/exec.md#the-plan).
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
// shell); the session shell itself then reads the clock, prints the
// markers and ends with the script's status through a function that
// returns it, so the daemon records the command's own exit code for the
// status read (the fallback evidence). The function unsets itself and the
// wrapper's variables, so the session shell keeps nothing of ours, and the
// script's subshell unsets them first, so the command sees nothing of ours
// either. No second subshell: each process creation costs milliseconds in
// a sandbox, and a short command is mostly process creations
// (docs/exec.md#end-markers). The form works in every shell the daemon may
// pick (zsh, bash, sh).
func (m endMarker) wrap(script string, noStdin bool) string {
	return endFunc + "() { unset -f " + endFunc + "; unset " + startVar + " " + statusVar + `; return "$1"; }; ` +
		zshClock + startVar + "=$EPOCHREALTIME; " + quietSubshell("unset "+startVar+"; unset -f "+endFunc+"; "+script, noStdin) + "; " +
		statusVar + `=$?; printf '\037%s%s=%d;%s;%s\n' ` + m.half1 + " " + m.half2 + ` "$` + statusVar + `" "$` + startVar + `" "$EPOCHREALTIME"; ` +
		`printf '\037%s%s\n' ` + m.half1 + " " + m.half2 + " >&2; " + endFunc + ` "$` + statusVar + `"`
}

// wrapFiles is wrap for the files path (docs/exec.md#the-files-path): the
// script's stdout and stderr go to the files out and errPath, and the
// markers end the files instead of the log, so the daemon's labeler never
// sees the output and one download brings it exact (NUL bytes, the
// daemon's label bytes, a last line without a newline). Background jobs
// the command leaves hold the files, not the session's pipes. When the
// files cannot be made (a read-only or full /tmp) the command runs as
// wrap runs it, and its output and markers are in the log.
func (m endMarker) wrapFiles(script string, noStdin bool, out, errPath string) string {
	o, e := shell.Quote(out), shell.Quote(errPath)
	in := ""
	if noStdin {
		in = " </dev/null"
	}
	// The subshell redirects itself (exec): dash drops the redirections of
	// a subshell inside a redirected brace group.
	status := `printf '\037%s%s=%d;%s;%s\n' ` + m.half1 + " " + m.half2 + ` "$` + statusVar + `" "$` + startVar + `" "$EPOCHREALTIME"`
	errMark := `printf '\037%s%s\n' ` + m.half1 + " " + m.half2
	return endFunc + "() { unset -f " + endFunc + "; unset " + startVar + " " + statusVar + `; return "$1"; }; ` +
		zshClock + startVar + "=$EPOCHREALTIME; " +
		"if { : >" + o + " && : >" + e + "; } 2>/dev/null; then " +
		"{ ( exec" + in + " >" + o + " 2>" + e + "; unset " + startVar + "; unset -f " + endFunc + "; " + script + " ); } 2>/dev/null; " +
		statusVar + "=$?; " + status + " >>" + o + " 2>/dev/null; " + errMark + " >>" + e + " 2>/dev/null; " +
		"else " + quietSubshell("unset "+startVar+"; unset -f "+endFunc+"; "+script, noStdin) + "; " +
		statusVar + "=$?; " + status + "; " + errMark + " >&2; fi; " +
		endFunc + ` "$` + statusVar + `"`
}

// quietSubshell runs script in a subshell whose parent says nothing of
// it. A shell whose child dies of a signal (kill -9, the OOM killer, a
// SIGTERM) prints a job-status line to its own stderr, and that line
// holds the child's whole text: the script, env values included
// (docs/exec.md#what-bash-gives). So the parent's stderr is /dev/null for
// the subshell's lifetime while the subshell keeps the real one (saved on
// fd 9, which the command never sees). The subshell's status is the
// group's: 137 for a SIGKILL, as bash gives. noStdin: the command reads
// /dev/null, as a shell run with no input does; the session shell's own
// stdin is the daemon's pipe, which holds a read open forever.
func quietSubshell(script string, noStdin bool) string {
	in := ""
	if noStdin {
		in = " </dev/null"
	}
	return "{ ( exec 2>&9 9>&-; " + script + " )" + in + "; } 9>&2 2>/dev/null"
}

// The wrapper's names in the session shell: endFunc ends the wrapped
// command with the script's status, statusVar holds that status while the
// markers are printed, startVar the shell's clock when the command starts.
const (
	endFunc   = "__paperclip_end"
	statusVar = "__paperclip_s"
	startVar  = "__paperclip_t0"
)

// zshClock loads the module that gives zsh (the daemon's first choice of
// session shell) its $EPOCHREALTIME, once per session shell; other shells
// skip it.
const zshClock = `[ -z "$ZSH_VERSION" ] || zmodload zsh/datetime 2>/dev/null; `

// scanMarker takes the next accepted bytes of stream b (stdout when
// stdout; other is the other stream) and returns what of them is the
// command's output, now: the bytes before the marker once it is seen, and
// otherwise all but a tail that could be the start of the marker (b.held,
// kept until the next bytes decide). After the marker nothing more is the
// command's (a background process it left running may still write; that
// is not waited for).
//
// A marker can arrive on the other stream's log: the daemon splits its log
// at its label runs (\x01\x01\x01, \x02\x02\x02), so a command whose
// unfinished last line holds one sends the rest of that line, our marker
// with it, to the other stream. Such a marker still counts (so the command
// ends at once) and is cut out; b.crossed records that the log garbled
// this command's output (the plan sends the line down the files path).
func scanMarker(b, other *streamBuf, tok []byte, stdout bool, data []byte) []byte {
	if b.ended && other.ended {
		return nil
	}
	// After this stream's own marker nothing is output, but the other
	// stream's marker may still come here (the log's order of the two
	// streams is the labelers').
	after := b.ended
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
		rest := buf[i+len(tok):]
		if len(rest) == 0 {
			b.held = append([]byte(nil), buf[i:]...)
			return out(buf[:i], after)
		}
		if rest[0] == '\n' { // the stderr marker
			if !stdout && !after {
				b.ended = true
				return buf[:i]
			}
			if !other.ended {
				other.ended, b.crossed = true, true
				buf = append(buf[:i:i], rest[1:]...)
				from = i
				continue
			}
		}
		st, complete, valid := parseStatus(rest)
		switch {
		case valid && complete && stdout && !after:
			b.ended, b.code, b.run, b.timed = true, st.code, st.run, st.timed
			return buf[:i]
		case valid && complete && !other.ended:
			other.ended, other.code, other.run, other.timed = true, st.code, st.run, st.timed
			b.crossed = true
			end := len(tok) + bytes.IndexByte(rest, '\n') + 1
			buf = append(buf[:i:i], buf[i+end:]...)
			from = i
			continue
		case valid && !complete:
			b.held = append([]byte(nil), buf[i:]...)
			return out(buf[:i], after)
		}
		from = i + 1 // the token without a status after it: output
	}
	if k := markerPrefixLen(buf[from:], tok); k > 0 {
		b.held = append([]byte(nil), buf[len(buf)-k:]...)
		return out(buf[:len(buf)-k], after)
	}
	return out(buf, after)
}

// out is what scanMarker returns as output: nothing after the stream's
// own marker.
func out(p []byte, after bool) []byte {
	if after {
		return nil
	}
	return p
}

// status is what the stdout marker carries: the exit status and, when
// the shell has a clock, the command's run time.
type status struct {
	code  int
	run   time.Duration
	timed bool
}

// Limits of the status line "=<digits>[;<start>;<end>]\n": the exit status
// has at most 10 digits, each clock reading at most 24 characters.
const (
	maxStatusDigits = 10
	maxClockLen     = 24
	maxStatusLen    = 1 + maxStatusDigits + 2*(1+maxClockLen) + 1
)

// parseStatus reads "=<digits>\n" or "=<digits>;<start>;<end>\n" at the
// start of p: valid says p is such a line or the start of one, complete
// that it is whole. The clock readings are digits with one '.' or ','
// (bash follows the locale's radix); empty or unreadable readings leave
// the status untimed but valid, since the status itself is proof.
func parseStatus(p []byte) (st status, complete, valid bool) {
	if len(p) == 0 {
		return st, false, true
	}
	if p[0] != '=' {
		return st, false, false
	}
	window := p[:min(len(p), maxStatusLen)]
	end := bytes.IndexByte(window, '\n')
	line := window[1:]
	if end >= 0 {
		line = window[1:end]
	} else if len(p) >= maxStatusLen {
		return st, false, false // no line end where one must be
	}
	code, clocks, hasClocks := bytes.Cut(line, []byte{';'})
	if len(code) > maxStatusDigits || (end >= 0 || hasClocks) && len(code) == 0 || !allDigits(code) {
		return st, false, false
	}
	start, stop, two := bytes.Cut(clocks, []byte{';'})
	if hasClocks && (!clockChars(start) || !clockChars(stop) || bytes.IndexByte(stop, ';') >= 0 ||
		len(start) > maxClockLen || len(stop) > maxClockLen) {
		return st, false, false
	}
	if end < 0 {
		return st, false, true
	}
	if hasClocks && !two {
		return st, false, false
	}
	n, err := strconv.Atoi(string(code))
	if err != nil {
		return st, false, false
	}
	st.code = n
	st.run, st.timed = runTime(start, stop)
	return st, true, true
}

func allDigits(p []byte) bool {
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func clockChars(p []byte) bool {
	for _, c := range p {
		if (c < '0' || c > '9') && c != '.' && c != ',' {
			return false
		}
	}
	return true
}

// runTime is end minus start, two readings of seconds with a fraction.
func runTime(start, end []byte) (time.Duration, bool) {
	a, okA := clockSeconds(start)
	b, okB := clockSeconds(end)
	if !okA || !okB || b < a || (b-a)*float64(time.Second) >= math.MaxInt64 { // a clock step, or not a duration
		return 0, false
	}
	return time.Duration((b - a) * float64(time.Second)), true
}

func clockSeconds(p []byte) (float64, bool) {
	if len(p) == 0 {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.Replace(string(p), ",", ".", 1), 64)
	return f, err == nil
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
