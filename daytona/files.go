package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// FilesService manages files inside a sandbox through its toolbox
// (docs/daytona.md#files). Transfers stream: no method holds a whole file in
// memory.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/file-system
type FilesService service

// FileInfo describes a file (GET /files/info).
type FileInfo struct {
	Name        string `json:"name"`
	Size        int64  `json:"size"`
	Mode        string `json:"mode"` // Go mode string, e.g. "-rw-r--r--"
	ModTime     string `json:"modTime,omitempty"`
	ModifiedAt  string `json:"modifiedAt,omitempty"`
	IsDir       bool   `json:"isDir"`
	Owner       string `json:"owner,omitempty"`
	Group       string `json:"group,omitempty"`
	Permissions string `json:"permissions,omitempty"` // e.g. "0644"
}

// UploadFile is one file of a bulk upload: Content is read once, streamed.
type UploadFile struct {
	Path    string // destination path in the sandbox
	Content io.Reader
}

// UploadedFile is one entry of the bulk-upload answer.
type UploadedFile struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// UploadResult is the bulk-upload answer.
type UploadResult struct {
	Files  []UploadedFile `json:"files"`
	Errors []string       `json:"errors,omitempty"`
}

// errUploadAborted stops the multipart writer once the request is over.
var errUploadAborted = errors.New("daytona: upload request ended")

// Upload sends files with POST /files/bulk-upload as a streamed
// multipart/form-data body (files[i].path before files[i].file, chunked,
// unknown length): memory use does not depend on file sizes. Parent
// directories are created; existing files are overwritten. Never retried.
// A failing Content reader fails the upload with that reader's error.
// Upload returns only once it has stopped reading the sources, so a source
// that blocks forever (e.g. a pipe whose producer ignores ctx) blocks it.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/file-system/POST/files/bulk-upload
func (s *FilesService) Upload(ctx context.Context, ref SandboxRef, files []UploadFile) (*UploadResult, *Response, error) {
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("%w: no files to upload", ErrInvalidArgument)
	}
	for _, f := range files {
		if f.Path == "" || f.Content == nil {
			return nil, nil, fmt.Errorf("%w: upload needs a path and content", ErrInvalidArgument)
		}
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	srcErr := make(chan error, 1)
	go func() {
		err := writeUpload(mw, files)
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err) // nil: EOF for the reader
		srcErr <- err
	}()
	resp, r, err := s.client.send(ctx, &call{rt: rBulkUpload, ref: ref, stream: pr, ctype: mw.FormDataContentType()})
	// Unblock the writer if the transport stopped reading early, then wait
	// for it so no goroutine outlives the call.
	pr.CloseWithError(errUploadAborted)
	werr := <-srcErr
	var se *sourceError
	if errors.As(werr, &se) {
		if resp != nil {
			resp.Body.Close()
		}
		return nil, r, se
	}
	if err != nil {
		return nil, r, err
	}
	defer resp.Body.Close()
	out := new(UploadResult)
	if err := json.NewDecoder(limitJSON(resp.Body)).Decode(out); err != nil && !errors.Is(err, io.EOF) {
		return nil, r, fmt.Errorf("%w: %s: %s", ErrMalformedResponse, rBulkUpload, s.client.redact(err.Error()))
	}
	drain(resp.Body)
	return out, r, nil
}

// sourceError is a failure to read an upload's Content.
type sourceError struct {
	path string
	err  error
}

func (e *sourceError) Error() string {
	return fmt.Sprintf("daytona: upload: reading content for %s: %v", e.path, e.err)
}
func (e *sourceError) Unwrap() error { return e.err }

func writeUpload(mw *multipart.Writer, files []UploadFile) error {
	for i, f := range files {
		if err := mw.WriteField(fmt.Sprintf("files[%d].path", i), f.Path); err != nil {
			return err
		}
		part, err := mw.CreateFormFile(fmt.Sprintf("files[%d].file", i), f.Path)
		if err != nil {
			return err
		}
		if _, err := copyDistinct(part, f.Content); err != nil {
			var re *readErr
			if errors.As(err, &re) {
				return &sourceError{path: f.Path, err: re.err}
			}
			return err
		}
	}
	return nil
}

// readErr marks an error that came from the source reader, not the pipe.
type readErr struct{ err error }

func (e *readErr) Error() string { return e.err.Error() }

// copyDistinct is io.Copy that tells read errors from write errors.
func copyDistinct(dst io.Writer, src io.Reader) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	for {
		nr, er := src.Read(buf)
		if nr > 0 {
			nw, ew := dst.Write(buf[:nr])
			n += int64(nw)
			if ew != nil {
				return n, ew
			}
		}
		if errors.Is(er, io.EOF) {
			return n, nil
		}
		if er != nil {
			return n, &readErr{er}
		}
	}
}

// UploadFile uploads one file (a one-entry bulk upload).
func (s *FilesService) UploadFile(ctx context.Context, ref SandboxRef, path string, content io.Reader) (*Response, error) {
	_, r, err := s.Upload(ctx, ref, []UploadFile{{Path: path, Content: content}})
	return r, err
}

// Download streams one file (GET /files/download). The caller must close
// the body; a body cut short returns io.ErrUnexpectedEOF from Read. A
// missing file is ErrNotFound (the daemon sends an empty body).
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/file-system/GET/files/download
func (s *FilesService) Download(ctx context.Context, ref SandboxRef, path string) (io.ReadCloser, *Response, error) {
	if path == "" {
		return nil, nil, fmt.Errorf("%w: path is empty", ErrInvalidArgument)
	}
	resp, r, err := s.client.send(ctx, &call{rt: rDownload, ref: ref, query: url.Values{"path": {path}},
		header: http.Header{"Accept": {"application/octet-stream"}}})
	if err != nil {
		return nil, r, err
	}
	return resp.Body, r, nil
}

type bulkDownloadBody struct {
	Paths []string `json:"paths"`
}

// BulkDownload is a streamed multipart answer of POST /files/bulk-download.
// Read parts in order with Next; Close releases the connection.
type BulkDownload struct {
	body      io.ReadCloser
	mr        *multipart.Reader
	client    *Client
	requested int
	seen      int
	cur       *DownloadedFile
}

// DownloadedFile is one part of a bulk download. If Err is non-nil the
// server could not send that file (an *ErrorResponse: ErrNotFound,
// ErrForbidden, ErrBadRequest, ErrServer); otherwise read the content from
// the file itself until io.EOF. A part shorter than its Content-Length
// reads as io.ErrUnexpectedEOF.
type DownloadedFile struct {
	Path string
	Err  error
	r    io.Reader
}

// Read reads the file content.
func (f *DownloadedFile) Read(p []byte) (int, error) {
	if f.Err != nil {
		return 0, f.Err
	}
	return f.r.Read(p)
}

// DownloadFiles asks for several files at once; parts come back in request
// order, each a file or an error part (docs/daytona.md#files).
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/file-system/POST/files/bulk-download
func (s *FilesService) DownloadFiles(ctx context.Context, ref SandboxRef, paths []string) (*BulkDownload, *Response, error) {
	if len(paths) == 0 {
		return nil, nil, fmt.Errorf("%w: no paths to download", ErrInvalidArgument)
	}
	resp, r, err := s.client.send(ctx, &call{rt: rBulkDownload, ref: ref, body: jsonBody(bulkDownloadBody{Paths: paths}),
		header: http.Header{"Accept": {"multipart/form-data"}}})
	if err != nil {
		return nil, r, err
	}
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mt, "multipart/") || params["boundary"] == "" {
		resp.Body.Close()
		return nil, r, fmt.Errorf("%w: %s: not a multipart answer", ErrMalformedResponse, rBulkDownload)
	}
	return &BulkDownload{body: resp.Body, mr: multipart.NewReader(resp.Body, params["boundary"]), client: s.client, requested: len(paths)}, r, nil
}

// maxErrorPart bounds the JSON of an error part.
const maxErrorPart = 64 << 10

// Next returns the next part, or io.EOF after the final boundary. A
// stream without its final boundary, or with fewer parts than requested,
// is an error matching ErrMalformedResponse.
func (b *BulkDownload) Next() (*DownloadedFile, error) {
	if b.cur != nil && b.cur.r != nil {
		// Drain the unread rest of the previous part (streamed, not kept).
		if _, err := io.Copy(io.Discard, b.cur.r); err != nil {
			return nil, err
		}
	}
	b.cur = nil
	p, err := b.mr.NextPart()
	if errors.Is(err, io.EOF) {
		if b.seen < b.requested {
			return nil, fmt.Errorf("%w: %s: %d of %d parts", ErrMalformedResponse, rBulkDownload, b.seen, b.requested)
		}
		return nil, io.EOF
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrMalformedResponse, rBulkDownload, b.client.redact(err.Error()))
	}
	b.seen++
	f := &DownloadedFile{Path: partFileName(p)}
	switch p.FormName() {
	case "error":
		raw, _ := io.ReadAll(io.LimitReader(p, maxErrorPart))
		var eb struct {
			StatusCode int    `json:"statusCode"`
			Message    string `json:"message"`
			Code       string `json:"code"`
			Path       string `json:"path"`
		}
		_ = json.Unmarshal(raw, &eb)
		if f.Path == "" {
			f.Path = eb.Path
		}
		if eb.StatusCode == 0 {
			eb.StatusCode = http.StatusInternalServerError
		}
		f.Err = &ErrorResponse{Method: rBulkDownload.method, Route: rBulkDownload.tmpl, StatusCode: eb.StatusCode,
			Message: b.client.redact(eb.Message), Code: eb.Code}
	case "file":
		f.r = p
		if cl := p.Header.Get("Content-Length"); cl != "" {
			if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
				f.r = &exactReader{r: p, left: n}
			}
		}
	default:
		return nil, fmt.Errorf("%w: %s: unexpected part %q", ErrMalformedResponse, rBulkDownload, p.FormName())
	}
	b.cur = f
	return f, nil
}

// partFileName returns the full filename of a part (Part.FileName keeps
// only the base name; the daemon sends the requested path, also as
// filename*=utf-8”… which mime decodes).
func partFileName(p *multipart.Part) string {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// Close releases the answer.
func (b *BulkDownload) Close() error { return b.body.Close() }

// exactReader fails when its source ends before n bytes.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if errors.Is(err, io.EOF) && e.left > 0 {
		return n, io.ErrUnexpectedEOF
	}
	if err == nil && e.left == 0 {
		return n, nil
	}
	return n, err
}

// CreateFolder creates a directory with mkdir -p semantics. mode is an
// octal string such as "755" (empty = "755").
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/file-system/POST/files/folder
func (s *FilesService) CreateFolder(ctx context.Context, ref SandboxRef, path, mode string) (*Response, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: path is empty", ErrInvalidArgument)
	}
	if mode == "" {
		mode = "755"
	}
	if !isOctal(mode) {
		return nil, fmt.Errorf("%w: mode %q is not octal", ErrInvalidArgument, mode)
	}
	return s.client.do(ctx, &call{rt: rCreateFolder, ref: ref, query: url.Values{"path": {path}, "mode": {mode}}}, nil)
}

// Info stats a path. A missing path is ErrNotFound.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/file-system/GET/files/info
func (s *FilesService) Info(ctx context.Context, ref SandboxRef, path string) (*FileInfo, *Response, error) {
	if path == "" {
		return nil, nil, fmt.Errorf("%w: path is empty", ErrInvalidArgument)
	}
	out := new(FileInfo)
	r, err := s.client.do(ctx, &call{rt: rFileInfo, ref: ref, query: url.Values{"path": {path}}}, out)
	if err != nil {
		return nil, r, err
	}
	return out, r, nil
}

// List lists a directory (empty path = the daemon's working directory).
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/file-system/GET/files
func (s *FilesService) List(ctx context.Context, ref SandboxRef, path string) ([]FileInfo, *Response, error) {
	var q url.Values
	if path != "" {
		q = url.Values{"path": {path}}
	}
	var out []FileInfo
	r, err := s.client.do(ctx, &call{rt: rListFiles, ref: ref, query: q}, &out)
	if err != nil {
		return nil, r, err
	}
	return out, r, nil
}

// Delete removes a file, or a directory when recursive. A missing path is
// ErrNotFound; a directory without recursive is ErrBadRequest.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/file-system/DELETE/files
func (s *FilesService) Delete(ctx context.Context, ref SandboxRef, path string, recursive bool) (*Response, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: path is empty", ErrInvalidArgument)
	}
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "true")
	}
	return s.client.do(ctx, &call{rt: rDeleteFile, ref: ref, query: q}, nil)
}

// Permissions is what SetPermissions changes; empty fields are left alone.
type Permissions struct {
	Mode  string // octal, e.g. "644"
	Owner string // user name or uid
	Group string // group name or gid
}

// SetPermissions changes mode, owner or group of a path.
//
// Daytona API docs: https://www.daytona.io/docs/en/tools/api/#daytona-toolbox/tag/file-system/POST/files/permissions
func (s *FilesService) SetPermissions(ctx context.Context, ref SandboxRef, path string, p Permissions) (*Response, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: path is empty", ErrInvalidArgument)
	}
	if p.Mode != "" && !isOctal(p.Mode) {
		return nil, fmt.Errorf("%w: mode %q is not octal", ErrInvalidArgument, p.Mode)
	}
	q := url.Values{"path": {path}}
	if p.Mode != "" {
		q.Set("mode", p.Mode)
	}
	if p.Owner != "" {
		q.Set("owner", p.Owner)
	}
	if p.Group != "" {
		q.Set("group", p.Group)
	}
	return s.client.do(ctx, &call{rt: rSetPermissions, ref: ref, query: q}, nil)
}

func isOctal(s string) bool {
	if s == "" || len(s) > 4 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '7' {
			return false
		}
	}
	return true
}
