package sync

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/internal/shell"
)

// The sandbox listing of a delta sync (docs/sync.md#delta): one round
// trip, NUL-delimited, bounded in entries and bytes. Its grammar, every
// field ended by a NUL:
//
//	A                       the target does not exist
//	N                       the target is not a directory
//	H uid gid umask hash    then per entry (the target first; without
//	                        it, find has no -printf: no GNU find):
//	type mode size mtime uid gid nlink ./path linktarget dev:inode:ctime
//	S                       then per regular file, when hash is 1:
//	<64 hex>  ./path        (sha256sum -z), or
//	<64 hex> key            (from the sandbox's record, delta_record.go)
//	Z<base64>               syncOut only, at most once: the changes
//	                        archive (delta_record.go), possibly empty
//	E                       the end: a listing without it was cut
//
// Every field comes from an untrusted sandbox: the listing only ever
// decides what is left out of an upload into that same sandbox, names are
// used as map keys and never as host paths, and anything that does not
// parse makes the mapping fall back to the full transfer.

// Listing bounds: like every other text the worker reads from the sandbox,
// the listing is bounded. 32 MiB is the client's bound of a JSON answer.
const (
	DefaultMaxListEntries = 250_000
	DefaultMaxListBytes   = 32 << 20
)

// sbEntry is one listed sandbox entry.
type sbEntry struct {
	typ      byte   // find %y: f d l p s c b D
	mode     uint32 // permission bits with setuid/setgid/sticky
	size     int64
	mtime    int64 // whole seconds
	mtimeSub bool  // the mtime has a fraction: tar never wrote it
	uid, gid int64
	nlink    int64
	link     string
	key      string // the record key (recordKey)
	hash     string // hex sha256, "" when not hashed
}

// listEntry is find's format of one listed entry.
const listEntry = `%y\0%m\0%s\0%T@\0%U\0%G\0%n\0%p\0%l\0%D:%i:%C@\0`

// listing is a parsed sandbox listing.
type listing struct {
	state    byte // 'A' absent, 'N' not a directory, 'T' no tools, 'H' listed
	uid, gid int64
	umask    uint32
	hashed   bool
	entries  map[string]*sbEntry // by name relative to the target, "" = the target
	// changes is the changes archive a syncOut listing carried (a tar,
	// decoded; nil: none, or one that was not base64).
	changes []byte
	// changesField is the listing's raw Z field (its bytes do not count
	// against the listing's bound).
	changesField []byte
}

// errListTooLarge ends a listing read at its bound.
var errListTooLarge = errors.New("listing too large")

// listScript lists the target (canonical, confined like mkconf's result)
// from inside it. Entries the host never packs (reserved scratch names,
// AppleDouble files) and the mapping's excludes are pruned; a pattern
// find matches more widely than the packer only leaves entries out of the
// listing, which makes them count as new: never wrong, only more sent.
//
// For SyncOut (out) AppleDouble names are listed too: the export's tar
// archives them, and an entry left out of the listing is downloaded, not
// skipped.
func (t Target) listScript(target string, m Mapping, hash, out bool, maxBytes int64, o Options) string {
	b := t.script(o)
	b.WriteString("exec 2>/dev/null\nt=" + shell.Quote(target) + "\n")
	b.WriteString(`if [ ! -e "$t" ] && [ ! -L "$t" ]; then printf 'A\0'; exit 0; fi
ct=$(canon "$t") || exit 42
inroot "$ct" || exit 42
[ -d "$ct" ] || { printf 'N\0'; exit 0; }
cd -- "$ct" || exit 42
h=0
`)
	if hash {
		// sha256sum -z of nothing: the empty input's hash, NUL-ended.
		b.WriteString("if command -v xargs >/dev/null; then case $(sha256sum -z </dev/null) in e3b0c442*) h=1;; esac; fi\n")
	}
	prune := []string{"-name " + shell.Quote(scratchPrefix+"*")}
	if !out {
		prune = append(prune, "-name "+shell.Quote("._*"))
	}
	for _, e := range m.Exclude {
		e = strings.TrimSuffix(strings.TrimPrefix(e, "./"), "/")
		switch {
		case e == "":
		case strings.Contains(e, "/"):
			prune = append(prune, "-path "+shell.Quote("./"+e))
		default:
			prune = append(prune, "-name "+shell.Quote(e))
		}
	}
	// walk lists below the target; the listing's own walk also prints
	// the target itself, first (-path . matches only the start).
	prunes := `\( ` + strings.Join(prune, " -o ") + ` \) -prune -o`
	walk := `LC_ALL=C find . -mindepth 1 ` + prunes
	listWalk := `LC_ALL=C find . -path . -printf '` + listEntry + `' -o ` + prunes
	b.WriteString(recordDirScript)
	fmt.Fprintf(b, "w=\nif [ -n \"$rd\" ]; then\n  %s\nfi\n", recordWorkScript)
	// The sandbox user's ids without two processes: the effective ids of
	// /proc's status of this shell, else id.
	b.WriteString(`u=; g=
while read -r k a e r; do case $k in Uid:) u=$e;; Gid:) g=$e;; esac; done </proc/$$/status
case $u$g in ''|*[!0-9]*) u=$(id -u); g=$(id -g);; esac
`)
	entry := listEntry
	changes := ""
	if out && changesAllowed(m) {
		changes = changesScript(o.maxChanges())
		maxBytes += changesField(o.maxChanges())
	}
	fmt.Fprintf(b, `{ printf 'H\0%%s\0%%s\0' "$u" "$g"; umask; printf '\0%%s\0' "$h"
  if [ -n "$w" ]; then %[2]s -printf '%[1]s' %[4]s; else %[2]s -printf '%[1]s'; fi
  printf 'S\0'
  if [ "$h" = 1 ]; then
    if [ -n "$w" ]; then
%[5]s
    else
      %[6]s
    fi
  fi
  printf 'E\0'
} | head -c %[3]d
`, entry, listWalk, maxBytes+1, recordWalk(o.recordSettle()), recordHashScript(walk, target, changes), hashEvery(walk))
	return b.String()
}

// list runs the listing and parses it. A nil listing with a nil error
// cannot happen; an error means "fall back", with the reason in it.
func (t Target) list(ctx context.Context, target string, m Mapping, out bool, o Options) (*listing, error) {
	maxBytes, maxEntries := o.maxListBytes(), o.maxListEntries()
	script := t.listScript(target, m, o.Delta != DeltaQuick, out, maxBytes, o)
	// The changes archive may come on top of the listing's own bound.
	readMax := maxBytes
	if out && changesAllowed(m) {
		readMax += changesField(o.maxChanges())
	}
	var buf bytes.Buffer
	code, _, err := t.Client.Toolbox.ExecuteStream(ctx, t.Sandbox, &daytona.ExecuteRequest{
		Command: "exec sh -c " + shell.Quote(script), Timeout: seconds(o.transferTimeout()),
	}, func(p []byte) error {
		if int64(buf.Len()+len(p)) > readMax {
			return errListTooLarge
		}
		buf.Write(p)
		return nil
	})
	if errors.Is(err, errListTooLarge) {
		return nil, fmt.Errorf("the listing exceeds %d bytes", maxBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("the listing failed: %w", err)
	}
	if code != 0 {
		return nil, fmt.Errorf("the listing failed (exit %d)", code)
	}
	out0 := buf.Bytes()
	l, err := parseListing(out0, maxEntries)
	if err == nil && int64(len(out0)-len(l.changesField)) > maxBytes {
		return nil, fmt.Errorf("the listing exceeds %d bytes", maxBytes)
	}
	return l, err
}

// parseListing parses the grammar above.
func parseListing(out []byte, maxEntries int) (*listing, error) {
	fields := bytes.Split(out, []byte{0})
	if len(fields) == 0 || len(fields[len(fields)-1]) != 0 {
		return nil, errors.New("the listing was cut")
	}
	fields = fields[:len(fields)-1]
	bad := func(what string) (*listing, error) { return nil, errors.New("the listing is malformed (" + what + ")") }
	if len(fields) == 1 {
		switch s := string(fields[0]); s {
		case "A", "N":
			return &listing{state: s[0]}, nil
		}
	}
	if len(fields) < 6 || string(fields[0]) != "H" || string(fields[len(fields)-1]) != "E" {
		return bad("frame")
	}
	l := &listing{state: 'H', entries: map[string]*sbEntry{}}
	var err error
	num := func(b []byte) int64 {
		n, e := strconv.ParseInt(string(b), 10, 64)
		if e != nil && err == nil {
			err = e
		}
		return n
	}
	l.uid, l.gid = num(fields[1]), num(fields[2])
	// umask, the builtin, ends its line.
	um, e := strconv.ParseUint(string(bytes.TrimSuffix(fields[3], []byte("\n"))), 8, 32)
	if err != nil || e != nil || um > 0o777 {
		return bad("header")
	}
	l.umask, l.hashed = uint32(um), string(fields[4]) == "1"
	rest := fields[5 : len(fields)-1]
	for len(rest) > 0 && string(rest[0]) != "S" {
		if len(rest) < 10 {
			return bad("entry")
		}
		if len(l.entries) >= maxEntries {
			return nil, fmt.Errorf("the listing exceeds %d entries", maxEntries)
		}
		f := rest[:10]
		rest = rest[10:]
		name, ok := listedName(f[7])
		if !ok || len(f[0]) != 1 {
			return bad("name")
		}
		mode, e := strconv.ParseUint(string(f[1]), 8, 32)
		if e != nil {
			return bad("mode")
		}
		en := &sbEntry{typ: f[0][0], mode: uint32(mode), size: num(f[2]), uid: num(f[4]), gid: num(f[5]), nlink: num(f[6]), link: string(f[8])}
		// The record key (recordKey) is dev:inode:size:mtime:ctime, as
		// find printed them.
		if dev, rest, ok := strings.Cut(string(f[9]), ":"); ok {
			if ino, ct, ok := strings.Cut(rest, ":"); ok {
				en.key = dev + ":" + ino + ":" + string(f[2]) + ":" + string(f[3]) + ":" + ct
			}
		}
		sec, frac, _ := strings.Cut(string(f[3]), ".")
		en.mtime, en.mtimeSub = num([]byte(sec)), strings.Trim(frac, "0") != ""
		if err != nil {
			return bad("number")
		}
		if _, dup := l.entries[name]; dup {
			return bad("duplicate")
		}
		l.entries[name] = en
	}
	if len(rest) == 0 {
		return bad("no hash section")
	}
	if l.entries[""] == nil {
		// find printed nothing, not even the target: no GNU find.
		return &listing{state: 'T'}, nil
	}
	hashes := rest[1:]
	if n := len(hashes); n > 0 && len(hashes[n-1]) > 0 && hashes[n-1][0] == 'Z' {
		// The changes archive: base64 has no NUL, and no hash line
		// starts with Z. One that does not decode is dropped (the export
		// then runs as without it).
		l.changesField = hashes[n-1]
		if a, e := base64.StdEncoding.DecodeString(string(hashes[n-1][1:])); e == nil && len(a) > 0 {
			l.changes = a
		}
		hashes = hashes[:n-1]
	}
	byKey := map[string]string{}
	for _, h := range hashes {
		// "<64 hex>  ./name" (or " *./name" for a binary-mode line), or
		// "<64 hex> key" from the record.
		if len(h) < 67 || !isHex(h[:64]) || h[64] != ' ' {
			return bad("hash")
		}
		if '0' <= h[65] && h[65] <= '9' {
			byKey[string(h[65:])] = string(h[:64])
			continue
		}
		name, ok := listedName(h[66:])
		if !ok {
			return bad("hash name")
		}
		if en := l.entries[name]; en != nil && en.typ == 'f' {
			en.hash = string(h[:64])
		}
	}
	for _, en := range l.entries {
		if en.typ == 'f' && en.hash == "" {
			en.hash = byKey[en.key]
		}
	}
	return l, nil
}

// listedName turns find's "./a/b" (or "." for the target) into "a/b".
// A name the daemon could not carry exactly (it answers JSON text, so
// bytes that are not UTF-8 arrive as U+FFFD) is refused: the listing
// would describe another file.
func listedName(b []byte) (string, bool) {
	s := string(b)
	if strings.ContainsRune(s, '\uFFFD') {
		return "", false
	}
	if s == "." {
		return "", true
	}
	rest, ok := strings.CutPrefix(s, "./")
	return rest, ok && rest != ""
}

func isHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func (o Options) maxListBytes() int64 {
	if o.MaxListBytes > 0 {
		return o.MaxListBytes
	}
	return DefaultMaxListBytes
}

func (o Options) maxListEntries() int {
	if o.MaxListEntries > 0 {
		return o.MaxListEntries
	}
	return DefaultMaxListEntries
}
