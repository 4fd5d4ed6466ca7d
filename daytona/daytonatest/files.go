package daytonatest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// errEscape is returned for a path that leaves the sandbox tree.
var errEscape = errors.New("path escapes the sandbox")

// errNoSpace is the error toolbox writes see when the allocation is used up.
var errNoSpace = syscall.ENOSPC

// within reports whether p is root or below it (both clean, absolute).
func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

// diskUsage is the bytes held by regular files in the sandbox tree.
func (sb *sandbox) diskUsage() int64 {
	var n int64
	_ = filepath.WalkDir(sb.root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// diskRemaining is the allocation minus current usage.
func (sb *sandbox) diskRemaining() int64 {
	sb.s.mu.Lock()
	alloc := sb.diskBytes
	sb.s.mu.Unlock()
	return alloc - sb.diskUsage()
}

// quotaWriter fails with ENOSPC once the allocation is used up.
type quotaWriter struct {
	f    *os.File
	left int64
}

func (q *quotaWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > q.left {
		n := 0
		if q.left > 0 {
			n, _ = q.f.Write(p[:q.left])
			q.left -= int64(n)
		}
		return n, &os.PathError{Op: "write", Path: q.f.Name(), Err: errNoSpace}
	}
	n, err := q.f.Write(p)
	q.left -= int64(n)
	return n, err
}

// writeBudget is the disk space one upload request may still use. It is
// measured once per request (a tree walk per file would make large bulk
// uploads quadratic); writes of concurrent requests that started later are
// not seen by it.
type writeBudget struct {
	sb   *sandbox
	left int64
	set  bool
}

func (b *writeBudget) remaining() int64 {
	if !b.set {
		b.left, b.set = b.sb.diskRemaining(), true
	}
	return b.left
}

// writeFile streams r into dest (a resolved host path) through a temp file
// in the same directory, held to the disk budget, as the daemon's bulk
// upload does. It returns the bytes written.
func (sb *sandbox) writeFile(dest string, r io.Reader, budget *writeBudget) (int64, error) {
	dir := filepath.Dir(dest)
	if err := sb.view.mkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("mkdir %s: %w", dir, err)
	}
	var old int64
	if fi, err := os.Stat(dest); err == nil && fi.Mode().IsRegular() {
		old = fi.Size() // overwritten: its bytes come back
	}
	tmp, err := os.CreateTemp(dir, ".daytona-upload-*")
	if err != nil {
		return 0, fmt.Errorf("create temp: %w", err)
	}
	qw := &quotaWriter{f: tmp, left: budget.remaining() + old}
	n, err := io.Copy(qw, r)
	if err != nil {
		tmp.Close()
		_ = os.Remove(tmp.Name())
		return 0, fmt.Errorf("write: %w", err)
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return 0, fmt.Errorf("close: %w", err)
	}
	_ = os.Chmod(tmp.Name(), 0o644)
	if err := sb.view.own(tmp.Name()); err != nil {
		_ = os.Remove(tmp.Name())
		return 0, fmt.Errorf("chown: %w", err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		_ = os.Remove(tmp.Name())
		return 0, fmt.Errorf("rename: %w", err)
	}
	budget.left -= n - old
	return n, nil
}

// fsStatus maps a file-system error to the daemon's status.
func fsStatus(err error) int {
	switch {
	case errors.Is(err, errEscape), errors.Is(err, fs.ErrPermission):
		return http.StatusForbidden
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound
	default:
		return http.StatusBadRequest
	}
}

type fileInfo struct {
	Name        string `json:"name"`
	Size        int64  `json:"size"`
	Mode        string `json:"mode"`
	ModTime     string `json:"modTime"`
	ModifiedAt  string `json:"modifiedAt"`
	IsDir       bool   `json:"isDir"`
	Owner       string `json:"owner"`
	Group       string `json:"group"`
	Permissions string `json:"permissions"`
}

func (sb *sandbox) toFileInfo(fi os.FileInfo) fileInfo {
	out := fileInfo{
		Name: fi.Name(), Size: fi.Size(), Mode: fi.Mode().String(), ModTime: fi.ModTime().String(),
		ModifiedAt: fi.ModTime().UTC().Format(time.RFC3339), IsDir: fi.IsDir(),
		Permissions: fmt.Sprintf("%04o", fi.Mode().Perm()),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid, gid := sb.view.viewIDs(st.Uid, st.Gid)
		out.Owner = strconv.FormatUint(uint64(uid), 10)
		out.Group = strconv.FormatUint(uint64(gid), 10)
	}
	return out
}

func tbListFiles(c *call) {
	p, err := c.sb.resolve(c.r.URL.Query().Get("path"), true)
	if err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	out := []fileInfo{}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			out = append(out, c.sb.toFileInfo(fi))
		}
	}
	writeJSON(c.w, http.StatusOK, out)
}

func tbFileInfo(c *call) {
	p, err := c.sb.resolve(c.r.URL.Query().Get("path"), true)
	if err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	fi, err := os.Stat(p)
	if err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	writeJSON(c.w, http.StatusOK, c.sb.toFileInfo(fi))
}

func parseMode(s string, def os.FileMode) (os.FileMode, bool) {
	if s == "" {
		return def, true
	}
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o7777 {
		return 0, false
	}
	return os.FileMode(v), true
}

func tbCreateFolder(c *call) {
	q := c.r.URL.Query()
	mode, ok := parseMode(q.Get("mode"), 0o755)
	if !ok {
		writeEmpty(c.w, http.StatusBadRequest)
		return
	}
	p, err := c.sb.resolve(q.Get("path"), true)
	if err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	if err := c.sb.view.mkdirAll(p, mode); err != nil {
		writeEmpty(c.w, http.StatusBadRequest)
		return
	}
	c.w.WriteHeader(http.StatusCreated)
}

func tbDeleteFile(c *call) {
	q := c.r.URL.Query()
	p, err := c.sb.resolve(q.Get("path"), false)
	if err != nil || c.sb.view.isMountRoot(p) {
		writeEmpty(c.w, http.StatusForbidden)
		return
	}
	fi, err := os.Lstat(p)
	if err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	if fi.IsDir() {
		if q.Get("recursive") != "true" {
			writeEmpty(c.w, http.StatusBadRequest)
			return
		}
		err = os.RemoveAll(p)
	} else {
		err = os.Remove(p)
	}
	if err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	c.w.WriteHeader(http.StatusNoContent)
}

func tbMoveFile(c *call) {
	q := c.r.URL.Query()
	src, err := c.sb.resolve(q.Get("source"), false)
	if err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	dst, err := c.sb.resolve(q.Get("destination"), false)
	if err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	if err := os.Rename(src, dst); err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	c.w.WriteHeader(http.StatusOK)
}

func tbPermissions(c *call) {
	q := c.r.URL.Query()
	p, err := c.sb.resolve(q.Get("path"), true)
	if err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	if _, err := os.Stat(p); err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	if m := q.Get("mode"); m != "" {
		mode, ok := parseMode(m, 0)
		if !ok {
			writeEmpty(c.w, http.StatusBadRequest)
			return
		}
		if err := os.Chmod(p, mode); err != nil {
			writeEmpty(c.w, fsStatus(err))
			return
		}
	}
	uid, ok := c.ownerID(q.Get("owner"), os.Getuid(), hostUserID)
	if !ok {
		writeEmpty(c.w, http.StatusBadRequest) // "user not found"
		return
	}
	gid, ok := c.ownerID(q.Get("group"), os.Getgid(), hostGroupID)
	if !ok {
		writeEmpty(c.w, http.StatusBadRequest) // "group not found"
		return
	}
	if uid != -1 || gid != -1 {
		if err := os.Lchown(p, uid, gid); err != nil {
			writeEmpty(c.w, fsStatus(err))
			return
		}
	}
	c.w.WriteHeader(http.StatusOK)
}

func tbDownload(c *call) {
	p, err := c.sb.resolve(c.r.URL.Query().Get("path"), true)
	if err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	f, err := os.Open(p)
	if err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.IsDir() {
		writeEmpty(c.w, http.StatusBadRequest) // "path must be a file"
		return
	}
	c.w.Header().Set("Content-Type", "application/octet-stream")
	c.w.Header().Set("Content-Disposition", "attachment; filename="+strconv.Quote(fi.Name()))
	http.ServeContent(c.w, c.r, "", fi.ModTime(), f)
}

func tbBulkDownload(c *call) {
	var req struct {
		Paths []string `json:"paths"`
	}
	if err := json.NewDecoder(c.r.Body).Decode(&req); err != nil || len(req.Paths) == 0 {
		writeGinError(c.w, http.StatusBadRequest, `request body must be {"paths": [ ... ]} and non-empty`)
		return
	}
	mw := multipart.NewWriter(c.w)
	_ = mw.SetBoundary("DAYTONA-FILE-BOUNDARY")
	c.w.Header().Set("Content-Type", "multipart/form-data; boundary=DAYTONA-FILE-BOUNDARY")
	c.w.WriteHeader(http.StatusOK)
	for _, p := range req.Paths {
		if !c.bulkPart(mw, p) {
			return // streaming failed: no closing boundary, as the daemon
		}
	}
	_ = mw.Close()
}

// bulkPart writes one file or error part; false if the stream broke.
func (c *call) bulkPart(mw *multipart.Writer, p string) bool {
	fail := func(status int, code, msg string) bool {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="error"`)
		h.Set("Content-Type", "application/json; charset=utf-8")
		w, err := mw.CreatePart(h)
		if err != nil {
			return false
		}
		b, _ := json.Marshal(map[string]any{"statusCode": status, "message": msg, "code": code,
			"timestamp": time.Now().UTC().Format(time.RFC3339), "path": p, "method": "POST"})
		_, err = w.Write(b)
		return err == nil
	}
	if strings.TrimSpace(p) == "" {
		return fail(http.StatusBadRequest, "INVALID_FILE_PATH", "invalid file path: empty path")
	}
	rp, err := c.sb.resolve(p, true)
	if err != nil {
		return fail(http.StatusForbidden, "FILE_ACCESS_DENIED", "file access denied: "+p)
	}
	f, err := os.Open(rp)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fail(http.StatusNotFound, "FILE_NOT_FOUND", "file not found: "+p)
		}
		return fail(http.StatusForbidden, "FILE_ACCESS_DENIED", "file access denied: "+p)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.IsDir() {
		return fail(http.StatusBadRequest, "INVALID_FILE_PATH", "invalid file path: is a directory: "+p)
	}
	ct := mime.TypeByExtension(filepath.Ext(p))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q; filename*=utf-8''%s`, p, url.PathEscape(p)))
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w, err := mw.CreatePart(h)
	if err != nil {
		return false
	}
	n, err := io.Copy(w, f)
	return err == nil && n == fi.Size()
}

func tbUpload(c *call) {
	defer drain(c.r)
	p := c.r.URL.Query().Get("path")
	if p == "" {
		writeEmpty(c.w, http.StatusBadRequest)
		return
	}
	dest, err := c.sb.resolve(p, true)
	if err != nil {
		writeEmpty(c.w, fsStatus(err))
		return
	}
	mr, err := c.r.MultipartReader()
	if err != nil {
		writeEmpty(c.w, http.StatusBadRequest)
		return
	}
	for {
		part, err := mr.NextPart()
		if err != nil {
			writeEmpty(c.w, http.StatusBadRequest)
			return
		}
		if part.FormName() != "file" {
			continue
		}
		if _, err := c.sb.writeFile(dest, part, &writeBudget{sb: c.sb}); err != nil {
			writeEmpty(c.w, http.StatusBadRequest)
			return
		}
		c.w.WriteHeader(http.StatusOK)
		return
	}
}

func drain(r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }

func tbBulkUpload(c *call) {
	defer drain(c.r)
	mr, err := c.r.MultipartReader()
	if err != nil {
		writeJSON(c.w, http.StatusBadRequest, map[string]any{"errors": []string{"invalid multipart form"}})
		return
	}
	type result struct {
		Path  string `json:"path"`
		Bytes int64  `json:"bytes"`
	}
	dests := map[string]string{}
	budget := &writeBudget{sb: c.sb}
	var errs []string
	files := []result{}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("reading part: %v", err))
			break
		}
		name := part.FormName()
		idx := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(name, "files["), "].path"), "].file")
		switch {
		case strings.HasSuffix(name, ".path"):
			b, err := io.ReadAll(io.LimitReader(part, 64<<10))
			if err != nil {
				errs = append(errs, fmt.Sprintf("path[%s]: %v", idx, err))
				continue
			}
			dest := strings.TrimSpace(string(b))
			if dest == "" {
				errs = append(errs, fmt.Sprintf("path[%s]: empty path", idx))
				continue
			}
			dests[idx] = dest
		case strings.HasSuffix(name, ".file"):
			dest, ok := dests[idx]
			if !ok {
				errs = append(errs, fmt.Sprintf("file[%s]: missing .path metadata", idx))
				continue
			}
			rp, err := c.sb.resolve(dest, true)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", dest, err))
				continue
			}
			n, err := c.sb.writeFile(rp, part, budget)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", dest, err))
				continue
			}
			files = append(files, result{Path: dest, Bytes: n})
		}
	}
	if len(errs) > 0 {
		writeJSON(c.w, http.StatusBadRequest, map[string]any{"errors": errs, "files": files})
		return
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"files": files})
}

// ownerID resolves an owner or group the toolbox is asked for to a host id:
// -1 for none, the sandbox view's id for the sandbox user or root, else a
// number or a host name (lookup gives its id); false when unknown.
func (c *call) ownerID(name string, ours int, lookup func(string) (string, error)) (int, bool) {
	if name == "" {
		return -1, true
	}
	if v, ok := c.sb.view.hostID(name, c.sb.user, ours); ok {
		return v, true
	}
	if v, err := strconv.Atoi(name); err == nil {
		return v, true
	}
	id, err := lookup(name)
	if err != nil {
		return 0, false
	}
	v, _ := strconv.Atoi(id)
	return v, true
}

// hostUserID and hostGroupID look a name up on the host.
func hostUserID(name string) (string, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return "", err
	}
	return u.Uid, nil
}

func hostGroupID(name string) (string, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return "", err
	}
	return g.Gid, nil
}
