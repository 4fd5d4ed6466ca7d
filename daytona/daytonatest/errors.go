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

// writeEmpty aborts with a status and no body, as several daemon handlers
// do (gin AbortWithError, docs/daytona.md#error-bodies).
func writeEmpty(w http.ResponseWriter, status int) {
	w.WriteHeader(status)
}

// writeGinError writes {"error": msg}, the PTY endpoints' shape.
func writeGinError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
