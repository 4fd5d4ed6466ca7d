package daytona

import (
	"net/url"
	"strings"
)

// apiKind says which base URL a route is relative to.
type apiKind int

const (
	mainAPI    apiKind = iota // relative to the API base URL (…/api)
	toolboxAPI                // relative to {toolboxProxyUrl}/{sandboxId}
)

// retryClass says when a route may be sent again (docs/daytona.md#retries).
type retryClass int

const (
	// retryNever: not idempotent (create, exec, upload); one attempt only.
	retryNever retryClass = iota
	// retryRateLimited: state-changing but safe to resend when the server
	// refused it with 429 and told us when to come back.
	retryRateLimited
	// retryIdempotent: reads (and DELETE, whose repeat is a 404 that callers
	// treat as success): network errors, 502/503/504 and 429 are retried.
	retryIdempotent
	// retryKeyed: a create named by an ID the client chose (a session):
	// retried like retryIdempotent, and a 409 to a resend is its success,
	// since only an earlier attempt of the same call can hold that ID.
	retryKeyed
)

// resendable: a call of this class may be sent again after a failure that
// leaves unknown whether it reached the server (a network error, a
// gateway's 502/503/504).
func (c retryClass) resendable() bool { return c == retryIdempotent || c == retryKeyed }

// route is one API operation the client calls. Every request goes through
// a route, so this table is the complete list of what the client sends; the
// fidelity test checks it against the OpenAPI documents.
type route struct {
	name   string // short name used in errors and tests
	method string
	tmpl   string // OpenAPI path template, e.g. /sandbox/{sandboxIdOrName}
	api    apiKind
	retry  retryClass
	ws     bool     // WebSocket upgrade (GET)
	query  []string // query parameters the client may send

	// reqSchema/respSchema name the OpenAPI component schema of the JSON
	// request/response body, and req/resp are zero values of the Go types
	// that (de)serialise them. The fidelity test proves every JSON field of
	// the Go type exists in the schema.
	reqSchema  string
	req        any
	respSchema string
	resp       any

	// unconfirmed marks a route or field set that is not in the v0.190.0
	// OpenAPI documents (TTL, official since the 0.218 clients;
	// docs/behavior.md#ttl, docs/daytona.md#ttl).
	unconfirmed bool
}

// String returns "METHOD /template", which never contains a secret.
func (r *route) String() string { return r.method + " " + r.tmpl }

// path fills the template's {placeholders} in order with path-escaped args.
func (r *route) path(args ...string) string {
	var b strings.Builder
	rest := r.tmpl
	for _, a := range args {
		i := strings.IndexByte(rest, '{')
		j := strings.IndexByte(rest, '}')
		if i < 0 || j < i {
			break
		}
		b.WriteString(rest[:i])
		b.WriteString(url.PathEscape(a))
		rest = rest[j+1:]
	}
	b.WriteString(rest)
	return b.String()
}

// allRoutes is filled by newRoute; tests enumerate it.
var allRoutes []*route

func newRoute(r route) *route {
	p := &r
	allRoutes = append(allRoutes, p)
	return p
}

// Main API routes (docs/daytona.md#sandboxes).
var (
	rCreateSandbox = newRoute(route{name: "createSandbox", method: "POST", tmpl: "/sandbox", retry: retryNever,
		reqSchema: "CreateSandbox", req: CreateSandboxRequest{}, respSchema: "Sandbox", resp: Sandbox{}})
	rGetSandbox = newRoute(route{name: "getSandbox", method: "GET", tmpl: "/sandbox/{sandboxIdOrName}", retry: retryIdempotent,
		respSchema: "Sandbox", resp: Sandbox{}})
	rListSandboxes = newRoute(route{name: "listSandboxes", method: "GET", tmpl: "/sandbox", retry: retryIdempotent,
		query:      []string{"labels", "states", "name", "limit", "cursor"},
		respSchema: "ListSandboxesResponse", resp: SandboxPage{}})
	rDeleteSandbox = newRoute(route{name: "deleteSandbox", method: "DELETE", tmpl: "/sandbox/{sandboxIdOrName}", retry: retryIdempotent,
		respSchema: "Sandbox", resp: Sandbox{}})
	rStartSandbox = newRoute(route{name: "startSandbox", method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/start", retry: retryRateLimited,
		respSchema: "Sandbox", resp: Sandbox{}})
	rStopSandbox = newRoute(route{name: "stopSandbox", method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/stop", retry: retryRateLimited,
		query:      []string{"force"},
		respSchema: "Sandbox", resp: Sandbox{}})
	rRecoverSandbox = newRoute(route{name: "recoverSandbox", method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/recover", retry: retryRateLimited,
		query:      []string{"skipStart"},
		respSchema: "Sandbox", resp: Sandbox{}})
	rArchiveSandbox = newRoute(route{name: "archiveSandbox", method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/archive", retry: retryRateLimited,
		respSchema: "Sandbox", resp: Sandbox{}})
	rSetAutostop = newRoute(route{name: "setAutostopInterval", method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/autostop/{interval}", retry: retryRateLimited,
		respSchema: "Sandbox", resp: Sandbox{}})
	rSetAutoarchive = newRoute(route{name: "setAutoArchiveInterval", method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/autoarchive/{interval}", retry: retryRateLimited,
		respSchema: "Sandbox", resp: Sandbox{}})
	rSetAutodelete = newRoute(route{name: "setAutoDeleteInterval", method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/autodelete/{interval}", retry: retryRateLimited,
		respSchema: "Sandbox", resp: Sandbox{}})
	// rSetTTL is an official route of the 0.218 clients (POST
	// /sandbox/{id}/ttl/{ttlMinutes}; the create request takes ttlMinutes
	// and the sandbox reports autoDestroyAt), newer than the v0.190.0
	// documents the route table is checked against (docs/daytona.md#ttl),
	// hence the unconfirmed mark, which only exempts it from that check.
	rSetTTL = newRoute(route{name: "setTtl", method: "POST", tmpl: "/sandbox/{sandboxIdOrName}/ttl/{minutes}", retry: retryRateLimited,
		respSchema: "Sandbox", resp: Sandbox{}, unconfirmed: true})
	rReplaceLabels = newRoute(route{name: "replaceLabels", method: "PUT", tmpl: "/sandbox/{sandboxIdOrName}/labels", retry: retryRateLimited,
		reqSchema: "SandboxLabels", req: labelsBody{}, respSchema: "SandboxLabels", resp: labelsBody{}})
	rLastActivity = newRoute(route{name: "updateLastActivity", method: "POST", tmpl: "/sandbox/{sandboxId}/last-activity", retry: retryRateLimited})
	rPreviewURL   = newRoute(route{name: "getPortPreviewUrl", method: "GET", tmpl: "/sandbox/{sandboxIdOrName}/ports/{port}/preview-url", retry: retryIdempotent,
		respSchema: "PortPreviewUrl", resp: PreviewURL{}})
	rSignedPreviewURL = newRoute(route{name: "getSignedPortPreviewUrl", method: "GET", tmpl: "/sandbox/{sandboxIdOrName}/ports/{port}/signed-preview-url", retry: retryIdempotent,
		query:      []string{"expiresInSeconds"},
		respSchema: "SignedPortPreviewUrl", resp: SignedPreviewURL{}})
	rToolboxProxyURL = newRoute(route{name: "getToolboxProxyUrl", method: "GET", tmpl: "/sandbox/{sandboxId}/toolbox-proxy-url", retry: retryIdempotent,
		respSchema: "ToolboxProxyUrl", resp: urlBody{}})
)

// Toolbox routes (docs/daytona.md#process, docs/daytona.md#session-exec, docs/daytona.md#log-snapshot, docs/daytona.md#follow-logs, docs/daytona.md#files, docs/daytona.md#pty), relative to {toolboxProxyUrl}/{sandboxId}.
var (
	rWorkDir = newRoute(route{name: "getWorkDir", method: "GET", tmpl: "/work-dir", api: toolboxAPI, retry: retryIdempotent,
		respSchema: "WorkDirResponse", resp: dirBody{}})
	rHomeDir = newRoute(route{name: "getUserHomeDir", method: "GET", tmpl: "/user-home-dir", api: toolboxAPI, retry: retryIdempotent,
		respSchema: "UserHomeDirResponse", resp: dirBody{}})
	rExecute = newRoute(route{name: "executeCommand", method: "POST", tmpl: "/process/execute", api: toolboxAPI, retry: retryNever,
		reqSchema: "ExecuteRequest", req: ExecuteRequest{}, respSchema: "ExecuteResponse", resp: ExecuteResponse{}})
	rCreateSession = newRoute(route{name: "createSession", method: "POST", tmpl: "/process/session", api: toolboxAPI, retry: retryKeyed,
		reqSchema: "CreateSessionRequest", req: createSessionBody{}})
	rGetSession = newRoute(route{name: "getSession", method: "GET", tmpl: "/process/session/{sessionId}", api: toolboxAPI, retry: retryIdempotent,
		respSchema: "Session", resp: Session{}})
	rDeleteSession = newRoute(route{name: "deleteSession", method: "DELETE", tmpl: "/process/session/{sessionId}", api: toolboxAPI, retry: retryIdempotent})
	rSessionExec   = newRoute(route{name: "sessionExecuteCommand", method: "POST", tmpl: "/process/session/{sessionId}/exec", api: toolboxAPI, retry: retryNever,
		reqSchema: "SessionExecuteRequest", req: SessionExecuteRequest{}, respSchema: "SessionExecuteResponse", resp: SessionExecuteResponse{}})
	rGetCommand = newRoute(route{name: "getSessionCommand", method: "GET", tmpl: "/process/session/{sessionId}/command/{commandId}", api: toolboxAPI, retry: retryIdempotent,
		respSchema: "Command", resp: Command{}})
	rCommandLogs = newRoute(route{name: "getSessionCommandLogs", method: "GET", tmpl: "/process/session/{sessionId}/command/{commandId}/logs", api: toolboxAPI, retry: retryIdempotent,
		respSchema: "SessionCommandLogsResponse", resp: CommandLogs{}})
	rFollowLogs = newRoute(route{name: "followSessionCommandLogs", method: "GET", tmpl: "/process/session/{sessionId}/command/{commandId}/logs", api: toolboxAPI, ws: true, query: []string{"follow"}})
	rSendInput  = newRoute(route{name: "sendInput", method: "POST", tmpl: "/process/session/{sessionId}/command/{commandId}/input", api: toolboxAPI, retry: retryNever,
		reqSchema: "SessionSendInputRequest", req: inputBody{}})

	rBulkUpload   = newRoute(route{name: "uploadFiles", method: "POST", tmpl: "/files/bulk-upload", api: toolboxAPI, retry: retryNever})
	rDownload     = newRoute(route{name: "downloadFile", method: "GET", tmpl: "/files/download", api: toolboxAPI, retry: retryIdempotent, query: []string{"path"}})
	rBulkDownload = newRoute(route{name: "downloadFiles", method: "POST", tmpl: "/files/bulk-download", api: toolboxAPI, retry: retryRateLimited,
		reqSchema: "FilesDownloadRequest", req: bulkDownloadBody{}})
	rCreateFolder = newRoute(route{name: "createFolder", method: "POST", tmpl: "/files/folder", api: toolboxAPI, retry: retryRateLimited, query: []string{"path", "mode"}})
	rFileInfo     = newRoute(route{name: "getFileInfo", method: "GET", tmpl: "/files/info", api: toolboxAPI, retry: retryIdempotent,
		query:      []string{"path"},
		respSchema: "FileInfo", resp: FileInfo{}})
	rListFiles = newRoute(route{name: "listFiles", method: "GET", tmpl: "/files", api: toolboxAPI, retry: retryIdempotent,
		query:      []string{"path"},
		respSchema: "FileInfo", resp: FileInfo{}})
	rDeleteFile     = newRoute(route{name: "deleteFile", method: "DELETE", tmpl: "/files", api: toolboxAPI, retry: retryIdempotent, query: []string{"path", "recursive"}})
	rSetPermissions = newRoute(route{name: "setFilePermissions", method: "POST", tmpl: "/files/permissions", api: toolboxAPI, retry: retryRateLimited, query: []string{"path", "mode", "owner", "group"}})

	rCreatePTY = newRoute(route{name: "createPtySession", method: "POST", tmpl: "/process/pty", api: toolboxAPI, retry: retryNever,
		reqSchema: "PtyCreateRequest", req: PTYCreateRequest{}, respSchema: "PtyCreateResponse", resp: ptyCreateResponse{}})
	rGetPTY = newRoute(route{name: "getPtySession", method: "GET", tmpl: "/process/pty/{sessionId}", api: toolboxAPI, retry: retryIdempotent,
		respSchema: "PtySessionInfo", resp: PTYSessionInfo{}})
	rResizePTY = newRoute(route{name: "resizePtySession", method: "POST", tmpl: "/process/pty/{sessionId}/resize", api: toolboxAPI, retry: retryRateLimited,
		reqSchema: "PtyResizeRequest", req: ptyResizeBody{}, respSchema: "PtySessionInfo", resp: PTYSessionInfo{}})
	rDeletePTY  = newRoute(route{name: "deletePtySession", method: "DELETE", tmpl: "/process/pty/{sessionId}", api: toolboxAPI, retry: retryIdempotent})
	rConnectPTY = newRoute(route{name: "connectPtySession", method: "GET", tmpl: "/process/pty/{sessionId}/connect", api: toolboxAPI, ws: true})
)
