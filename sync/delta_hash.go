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
)

// hashJob is a host file whose sandbox copy agrees in every cheap field:
// its sha256 must equal want for the file to be left out.
type hashJob struct {
	name, abs string
	size      int64
	want      string
}

// hashAll hashes the jobs' host files, a few at a time, and returns those
// whose content differs from the sandbox's.
func hashAll(ctx context.Context, jobs []hashJob) ([]hashJob, error) {
	workers := min(runtime.GOMAXPROCS(0), 4, len(jobs))
	next := make(chan hashJob)
	var mu stdsync.Mutex
	var differ []hashJob
	var first error
	var wg stdsync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range next {
				sum, err := hostHash(j.abs, j.size)
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
// same tree reads only the files that changed. Bounded: when full it is
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
// sends of it), from hostHashes when the file is unchanged since.
func hostHash(abs string, size int64) (string, error) {
	f, err := os.Open(abs)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	var key hashKey
	if ok && fi.Size() == size {
		key = hashKey{abs, uint64(st.Dev), uint64(st.Ino), size, fi.ModTime().UnixNano(), ctime(st)}
		hostHashes.mu.Lock()
		sum, hit := hostHashes.m[key]
		hostHashes.mu.Unlock()
		if hit {
			return sum, nil
		}
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
	if key.path != "" {
		hostHashes.mu.Lock()
		if len(hostHashes.m) >= maxHostHashes {
			clear(hostHashes.m)
		}
		hostHashes.m[key] = sum
		hostHashes.mu.Unlock()
	}
	return sum, nil
}
