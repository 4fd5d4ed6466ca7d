package daytonatest

import (
	"encoding/json"
	"net/http"
	"time"
)

// writeJSON writes v as the JSON body with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeAPIError writes the main API's error shape (NestJS AllExceptionsFilter,
// docs/daytona.md#error-bodies).
func writeAPIError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	writeJSON(w, status, map[string]any{
		"path":       r.URL.Path,
		"timestamp":  time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		"statusCode": status,
		"error":      http.StatusText(status),
		"message":    msg,
	})
}

// toolboxCode maps a status to the proxy/daemon error code of docs/daytona.md#error-bodies.
func toolboxCode(status int) string {
	switch status {
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusUnauthorized:
		return "UNAUTHORIZED"
	case http.StatusConflict:
		return "CONFLICT"
	case http.StatusBadRequest:
		return "BAD_REQUEST"
	case http.StatusForbidden:
		return "FORBIDDEN"
	case http.StatusRequestTimeout:
		return "REQUEST_TIMEOUT"
	case http.StatusGone:
		return "GONE"
	case http.StatusUnprocessableEntity:
		return "UNPROCESSABLE_ENTITY"
	default:
		return "INTERNAL_SERVER_ERROR"
	}
}

// toolboxPrefix is the lowercase message prefix the Go middleware adds.
func toolboxPrefix(status int) string {
	switch status {
	case http.StatusNotFound:
		return "not found: "
	case http.StatusUnauthorized:
		return "unauthorized: "
	case http.StatusConflict:
		return "conflict: "
	case http.StatusBadRequest:
		return "bad request: "
	case http.StatusForbidden:
		return "forbidden: "
	case http.StatusRequestTimeout:
		return "request timeout: "
	case http.StatusGone:
		return "gone: "
	case http.StatusUnprocessableEntity:
		return "unprocessable entity: "
	default:
		return "internal server error: "
	}
}

// writeToolboxError writes the proxy/runner/daemon error shape; msg is
// given without its prefix, which is added here.
func writeToolboxError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	writeJSON(w, status, map[string]any{
		"statusCode": status,
		"message":    toolboxPrefix(status) + msg,
		"code":       toolboxCode(status),
		"timestamp":  time.Now().UTC().Format(time.RFC3339),
		"path":       r.URL.Path,
		"method":     r.Method,
	})
}

// writeDaemonInternal writes the daemon's answer to an error its handler
// wrapped with fmt.Errorf: the middleware no longer sees a typed error and
// falls back to its default, a 500 with the message, no code, a zero
// timestamp and an empty path (docs/emulator.md#lost-sessions-and-dead-shells).
func writeDaemonInternal(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusInternalServerError, map[string]any{
		"statusCode": http.StatusInternalServerError,
		"message":    msg,
		"timestamp":  "0001-01-01T00:00:00Z",
		"path":       "",
	})
}

// writeSessionEnded answers an exec that cannot reach a session shell. The
// v0.190.0 daemon says why in a 500 (lost: "not found: session not found";
// dead shell: the broken pipe of the write); with WithStructuredErrors, a
// newer daemon's 410 SESSION_ENDED.
func (c *call) writeSessionEnded(lost bool) {
	if c.s.cfg.structuredErrors {
		writeJSON(c.w, http.StatusGone, map[string]any{
			"statusCode": http.StatusGone,
			"message":    "session has ended",
			"code":       "SESSION_ENDED",
			"source":     "daemon",
			"timestamp":  time.Now().UTC().Format(time.RFC3339),
			"path":       c.r.URL.Path,
			"method":     c.r.Method,
		})
		return
	}
	if lost {
		writeDaemonInternal(c.w, "failed to execute command: not found: session not found")
		return
	}
	writeDaemonInternal(c.w, "failed to execute command: bad request: failed to write command: write |1: broken pipe")
}

// writeEmpty aborts with a status and no body, as several daemon handlers
// do (gin AbortWithError, docs/daytona.md#error-bodies).
func writeEmpty(w http.ResponseWriter, status int) {
	w.WriteHeader(status)
}

// writeGinError writes {"error": msg}, the PTY endpoints' shape.
func writeGinError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
