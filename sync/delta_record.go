package sync

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// The sandbox's hash record (docs/sync.md#delta): hashing every regular
// file of a target on every listing reads the whole tree in the sandbox,
// which is most of a delta's time. So the listing keeps, per target, a
// record of the hashes it computed, keyed by what the kernel says about
// each file: device, inode, size, mtime and ctime, all to the nanosecond
// (recordKey). A write to a file moves its ctime to the kernel's clock and
// no call sets a ctime back, so a file whose key is recorded still has the
// recorded content, even if its size and mtime were kept on purpose; only
// files whose key is not recorded are read. Two limits keep that promise:
//
//   - A file whose ctime is within recordSettle of the listing's start is
//     hashed and not recorded: a second write within the same clock tick
//     (the kernel's timestamps are that coarse) would leave its key
//     unchanged.
//   - The record is only read, never trusted beyond its own sandbox: it
//     decides which hashes the sandbox reports for its own files, which a
//     sandbox could misreport anyway. A line that does not parse is
//     dropped; a record that cannot be written whole is removed.
//
// It lives outside the sync root (so outside every target): under
// $XDG_CACHE_HOME (else ~/.cache)/paperclip-delta, else
// $TMPDIR (else /tmp)/paperclip-delta-<uid>, whichever resolves outside
// the root and is the sandbox user's; with neither, or without the tools
// (GNU sort, join, cut, paste, grep -z, cmp, mktemp), every file is hashed
// as before.

// recordKey is find's format of a regular file's record key.
const recordKey = `%D:%i:%s:%T@:%C@`

// recordDirScript picks the record directory into $rd ("" = none): the
// first candidate that resolves outside the root and is the sandbox
// user's, made (0700) if its nearest existing ancestor is outside the root.
const recordDirScript = `rd=
tryrd() {
  case $1 in /*) ;; *) return 1;; esac
  if [ ! -d "$1" ]; then
    a=$1
    while [ ! -e "$a" ] && [ ! -L "$a" ]; do a=$(dirname -- "$a"); done
    ca=$(canon "$a") && ! inroot "$ca" && mkdir -p -m 700 -- "$1" || return 1
  fi
  c=$(canon "$1") && ! inroot "$c" && [ -d "$c" ] && [ -O "$c" ] && rd=$c
}
if [ "$h" = 1 ]; then
  tryrd "${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/paperclip-delta" || tryrd "${TMPDIR:-/tmp}/paperclip-delta-$(id -u)" || rd=
fi
`

// recordWorkScript makes the listing's private work directory $w in the
// record directory (emptied again at the end; one a killed listing left
// behind is removed an hour later: the find runs only when some work
// directory is there).
const recordWorkScript = `set -- "$rd"/w.*
  [ ! -e "$1" ] || find "$rd" -maxdepth 1 -name 'w.*' -mmin +60 -exec rm -rf -- {} + 2>/dev/null
  w=$(mktemp -d "$rd/w.XXXXXX") || w=`

// recordWalk is added to the listing's walk: it writes every regular
// file's "key ./path" to $w/raw as it lists, the key of a file too recent
// to record (a ctime less than settle seconds before the walk) prefixed
// with r, which no recorded key matches.
func recordWalk(settle int) string {
	return fmt.Sprintf(`\( -type f \( -newerct '%d seconds ago' -fprintf "$w/raw" 'r%s %%p\0' -o -fprintf "$w/raw" '%s %%p\0' \) \)`, settle, recordKey, recordKey)
}

// recordName is the record file of a target: the hex sha256 of its path
// as the worker names it. Any record would do for any target (a key
// recorded is a content recorded, wherever the file lies); one per target
// keeps each small.
func recordName(target string) string {
	sum := sha256.Sum256([]byte(target))
	return hex.EncodeToString(sum[:])
}

// recordHashScript prints the hash section of a listing: the record's
// "<hash> <key>" line for a file whose key the record holds, sha256sum's
// "<hash>  ./path" for every other file; then it writes the new record
// (lines "<hash> <key>", sorted by key), unless nothing changed. The
// fresh hashes are paired with their keys by position (xargs keeps the
// order); the pairing is checked against the paths sha256sum printed, and
// a record that fails the check is removed rather than written. A record
// line that does not parse is dropped when the record is read. A tool
// that fails (no -z, say) before anything was printed makes the section
// hash every file, as without a record. walk is the listing's find.
//
// changes, when set, runs after the record is written (changesScript).
func recordHashScript(walk, target, changes string) string {
	return `      rec="$rd/` + recordName(target) + `"
      if LC_ALL=C sort -z -t ' ' -k 1,1 "$w/raw" >"$w/files" &&
        { [ ! -f "$rec" ] || LC_ALL=C grep -z -E '^[0-9a-f]{64} [0-9]+:[0-9]+:[0-9]+:-?[0-9]+(\.[0-9]+)?:[0-9]+(\.[0-9]+)?$' "$rec"; [ $? -le 1 ]; } >"$w/rec" &&
        LC_ALL=C join -z --nocheck-order -t ' ' -1 1 -2 2 -o 2.1,1.1 "$w/files" "$w/rec" >"$w/hit" &&
        LC_ALL=C join -z --nocheck-order -t ' ' -1 1 -2 2 -v 1 "$w/files" "$w/rec" >"$w/miss" &&
        cut -z -d ' ' -f 2- "$w/miss" >"$w/paths"; then
        xargs -0 -r sha256sum -z -- <"$w/paths" >"$w/sum"
        cat "$w/hit" "$w/sum"
        if [ -s "$w/miss" ] || ! cmp -s "$w/hit" "$w/rec"; then
          if cut -z -d ' ' -f 1 "$w/miss" >"$w/mkeys" && cut -z -c 67- "$w/sum" | cmp -s - "$w/paths" &&
            { cat "$w/hit" && cut -z -c 1-64 "$w/sum" | paste -z -d ' ' - "$w/mkeys"; } |
            LC_ALL=C grep -z -v '^[0-9a-f]* r' | LC_ALL=C sort -z -u -t ' ' -k 2,2 >"$w/new" && [ -s "$w/new" ] && mv -f -- "$w/new" "$rec"; then :; else rm -f -- "$rec"; fi
        fi
` + changes + `      else
        rm -f -- "$rec"
        ` + hashEvery(walk) + `
      fi
      rm -rf -- "$w"`
}

// hashEvery is the hash section without a record: every regular file the
// listing's walk finds, hashed.
func hashEvery(walk string) string {
	return walk + ` -type f -print0 | xargs -0 -r sha256sum -z --`
}

// defaultRecordSettle is how recent a ctime may be and still be recorded:
// well above the kernel's timestamp granularity (a clock tick).
const defaultRecordSettle = 2 * time.Second

// settleTime is how recent a ctime may be and still be recorded, in the
// sandbox's record and the host's.
func (o Options) settleTime() time.Duration {
	if o.settle != 0 {
		return o.settle
	}
	return defaultRecordSettle
}

// recordSettle is settleTime in the sandbox script's whole seconds.
func (o Options) recordSettle() int { return int(o.settleTime() / time.Second) }

// The changes archive (docs/sync.md#delta). A syncOut delta needs from
// the sandbox only the content of the files that differ from the host
// target: directories and links travel as their listing describes them
// (the export's merge keeps nothing else of theirs). The files a listing
// had to hash are those whose record key is new: in a lease's steady
// state, what the agent changed since the last listing. So when those
// files are few, the listing carries them along, as a tar (the export's
// format and flags) in base64, and when they hold every file the host
// lacks, the delta needs no second round trip: no export script, no
// download, no scratch file to remove. Otherwise the export runs as
// before. The archive comes from the same untrusted sandbox as the
// export's and is verified the same way; it only ever supplies members the
// worker's own comparison asked for.

// defaultMaxChanges bounds the files' bytes a listing's changes archive
// may hold (the archive itself is cut at twice that, headers included).
// base64 adds a third, so beyond a few MiB the export's download, at the
// cost of its round trips, is the cheaper way.
const defaultMaxChanges = 4 << 20

func (o Options) maxChanges() int64 {
	if o.changesMax != 0 {
		return o.changesMax
	}
	return defaultMaxChanges
}

// changesField is the most a changes archive adds to a listing: its Z
// field with the base64 of an archive cut at twice max.
func changesField(max int64) int64 {
	if max < 0 {
		return 0
	}
	return int64(base64.StdEncoding.EncodedLen(int(2*max))) + 2
}

// changesAllowed reports whether a syncOut listing may carry a changes
// archive for m: only where the listing holds everything the export's tar
// would archive. find prunes an exclude without a slash exactly where tar
// does; other patterns may differ, and then the export runs.
func changesAllowed(m Mapping) bool {
	for _, e := range m.Exclude {
		if strings.Contains(strings.TrimPrefix(e, "./"), "/") {
			return false
		}
	}
	return !m.FollowSymlinks
}

// changesScript prints the Z field: a tar of the files the listing had to
// hash ($w/paths), when their sizes (the third field of each record key
// in $w/miss) add up to at most max. Nothing is printed for none, for too
// many bytes, or for a negative max. The sizes are digits from find; the
// case guards the arithmetic, which would end the script on anything
// else.
func changesScript(max int64) string {
	if max < 0 {
		return ""
	}
	return fmt.Sprintf(`        if [ -s "$w/paths" ]; then
          sz=$(cut -z -d : -f 3 "$w/miss" | tr '\0' +)
          case $sz in *[!0-9+]*) ;; *)
            if [ $((${sz}0)) -le %[1]d ]; then
              printf Z
              LC_ALL=C tar -c --format=gnu --no-xattrs --hard-dereference --no-recursion --null -T "$w/paths" -f - | head -c %[2]d | base64 -w 0
              printf '\0'
            fi;;
          esac
        fi
`, max, 2*max)
}
