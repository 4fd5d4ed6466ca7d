package sync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime"
	stdsync "sync"
	"syscall"
	"time"
)

// hashJob is a host file whose sandbox copy agrees in every cheap field:
// its sha256 must equal want for the file to be left out.
type hashJob struct {
	name, abs string
	size      int64
	want      string
	fi        os.FileInfo // from the walk that found the file (nil = stat it)
}

// hashAll hashes the jobs' host files, a few at a time, and returns those
// whose content differs from the sandbox's.
func hashAll(ctx context.Context, jobs []hashJob, settle time.Duration) ([]hashJob, error) {
	workers := min(runtime.GOMAXPROCS(0), 4, len(jobs))
	next := make(chan hashJob)
	var mu stdsync.Mutex
	var differ []hashJob
	var first error
	var wg stdsync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range next {
				sum, err := hostHash(j.abs, j.size, j.fi, settle)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if sum != j.want {
					differ = append(differ, j)
				}
				mu.Unlock()
			}
		})
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- j
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return differ, first
}

// hostHashes remembers the sha256 of host files the worker hashed, by
// path, device, inode, size, mtime and ctime. Any write to a file moves
// its ctime, and no call can set a ctime back, so a file whose key is
// unchanged still has the remembered content; the next delta sync of the
// same tree reads only the files that changed. Files whose ctime is too
// recent are not remembered (see hostHash). Bounded: when full it is
// emptied.
var hostHashes = struct {
	mu stdsync.Mutex
	m  map[hashKey]string
}{m: map[hashKey]string{}}

const maxHostHashes = 1 << 18

type hashKey struct {
	path               string
	dev, ino           uint64
	size, mtime, ctime int64
}

// hostHash is the sha256 of the first size bytes of a host file (what pack
// sends of it), from hostHashes when the file is unchanged since (walked,
// if set, is its information from the walk that found it). A file whose
// ctime lies within settle of now is not remembered.
func hostHash(abs string, size int64, walked os.FileInfo, settle time.Duration) (string, error) {
	// The walk's information first (else a stat): a remembered file costs
	// no open. A file changed since the walk has another key, so another
	// entry or none.
	if walked == nil {
		walked, _ = os.Stat(abs)
	}
	if walked != nil {
		if sum, hit := remembered(abs, walked, size); hit {
			return sum, nil
		}
	}
	f, err := os.Open(abs)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	key, ok := keyOf(abs, fi, size)
	if sum, hit := remembered(abs, fi, size); hit {
		return sum, nil
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, size))
	if err != nil {
		return "", err
	}
	if n != size {
		return "", deltaRefused("a host file shrank while it was compared")
	}
	sum := hex.EncodeToString(h.Sum(nil))
	// A file changed within the last moments is not remembered: a second
	// write in the same clock tick would leave its ctime, so its key,
	// unchanged (the sandbox's record follows the same rule).
	if ok && time.Since(time.Unix(0, key.ctime)) > settle {
		hostHashes.mu.Lock()
		if len(hostHashes.m) >= maxHostHashes {
			clear(hostHashes.m)
		}
		hostHashes.m[key] = sum
		hostHashes.mu.Unlock()
	}
	return sum, nil
}

// keyOf is the hostHashes key of a host file of the expected size.
func keyOf(abs string, fi os.FileInfo, size int64) (hashKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || fi.Size() != size {
		return hashKey{}, false
	}
	return hashKey{abs, uint64(st.Dev), uint64(st.Ino), size, fi.ModTime().UnixNano(), ctime(st)}, true
}

// remembered looks a host file up in hostHashes.
func remembered(abs string, fi os.FileInfo, size int64) (string, bool) {
	key, ok := keyOf(abs, fi, size)
	if !ok {
		return "", false
	}
	hostHashes.mu.Lock()
	defer hostHashes.mu.Unlock()
	sum, hit := hostHashes.m[key]
	return sum, hit
}
