// Package daytonatest is an in-memory emulator of the Daytona API (release
// v0.190.0) for tests: a control plane with Daytona's lifecycle state
// machine and a toolbox that runs commands for real, on the host, with
// bash. It speaks the wire JSON of the Daytona OpenAPI documents (their
// facts are in daytona/testdata/openapi-facts.txt) and docs/daytona.md, and is deliberately independent of package
// daytona (our client): the two must agree through the wire format only.
//
// Never import it from non-test code other than cmd/daytona-sim: the
// worker binary must not link it.
//
// # Starting it
//
//	srv := daytonatest.NewServer(t)          // 127.0.0.1, closed by t.Cleanup
//	client := daytona.NewClient(daytona.WithAPIURL(srv.URL()), daytona.WithAPIKey(srv.APIKey()))
//
// srv.URL() is the API base URL including its path prefix
// (http://127.0.0.1:PORT/api); sandboxes report toolboxProxyUrl =
// srv.ToolboxURL() (http://127.0.0.1:PORT/proxy/toolbox), so toolbox calls
// go to <toolboxProxyUrl>/<sandboxId>/<path> on the same server. Both
// planes sit under non-root prefixes so a client that builds absolute
// paths fails. Every request needs "Authorization: Bearer <APIKey()>"
// (toolbox calls also accept the sandbox's X-Daytona-Preview-Token);
// otherwise 401.
//
// Outside tests: New(opts...) returns a Server that is an http.Handler;
// Start("127.0.0.1:0") serves it on loopback. The zero Server is a usable
// handler too (random API key, temp dir removed by Close).
//
// # Control plane
//
// Create (POST /sandbox): snapshot path creating → started, and the call
// waits for "started" (up to DefaultStartWait, 30 s) as Daytona's
// does; buildInfo path pending_build → creating → started, answered at
// once. Names are unique per organization (409 "Sandbox with name X
// already exists"); default name = id. Stop: started → stopping → stopped
// (ephemeral autoDeleteInterval 0: → destroying → destroyed); start:
// stopped → starting → started, archived → restoring → started, no-op when
// started, 409 "Sandbox state change in progress" during a transition;
// recover: error (recoverable) → stopped → starting → started; archive:
// stopped → archiving → archived. Delete is asynchronous: the reply shows
// desiredState "destroyed" and the name renamed DESTROYED_<name>_<ms>
// (get-by-name 404s at once, the name is free), then destroying →
// destroyed, after which GET by id is 404. Intervals, labels, public,
// network settings are stored and readable; setters answer 201 (autostop,
// autoarchive, autodelete, public, last-activity) or 200 (labels,
// network-settings) with the full DTO. GET /sandbox filters by labels
// (JSON containment), states, id/name prefix, with keyset cursor
// pagination (limit ≤ 200, nextCursor null at the end); the deprecated
// GET /sandbox/paginated pages by number. Stopping, deleting or erroring a
// sandbox kills its sessions and PTYs: sessions do not survive a stop.
//
// Each intermediate state lasts WithTransitionDelay (5 ms by default). To
// observe one deterministically, freeze it:
//
//	release := srv.HoldTransitions(id) // "" = every sandbox
//	... POST /stop; GET shows "stopping"; start is refused with 409 ...
//	release()
//	err := srv.AwaitState(ctx, id, daytonatest.StateStopped)
//
// While held, create/start/recover answer at once with the intermediate
// state. Test-side controls: SetError(id, reason, recoverable),
// LoseContainer(id) (toolbox 404 "not found: sandbox container not found:
// …"; a start ends in error with MissingContainerReason(id), recoverable
// false), StopSandbox(id) (a server-side stop), RunAutoLifecycle(now)
// (the auto-stop/archive/delete cron, run once at a time the test picks;
// the emulator never runs it by itself), SetDiskAllocation(id, bytes).
// Inspection: Sandbox(idOrName), Sandboxes(), DiskUsage(id), Sessions(id),
// PTYs(id).
//
// # Toolbox
//
// Each sandbox has its own tree under WithDir (NewServer: t.TempDir()):
// <dir>/<id>/home/<user> is the home and work dir (GET /user-home-dir and
// /work-dir return that host path) and <dir>/<id>/tmp is TMPDIR. Paths
// the client sends are real host paths inside that tree; relative ones
// resolve against the work dir. Every files route resolves existing path
// components through symlinks and rejects (403, empty body, or a bulk
// upload error entry) anything outside the tree: "..", absolute paths
// elsewhere, symlinks (also dangling ones) pointing out.
//
// Processes run as the host user with a minimal environment (PATH from the
// host, HOME, USER, LOGNAME, SHELL, LANG, TMPDIR, DAYTONA_SANDBOX_ID,
// DAYTONA_SANDBOX_USER, plus the sandbox's env); nothing else of the host
// environment is inherited. One-shot POST /process/execute feeds the
// command to a fresh bash on stdin and returns combined output; a timeout
// kills the process group and answers 408.
//
// A session is one real, persistent, non-login bash. Each exec writes one
// line to its stdin that `source`s the command (so cwd, variables,
// functions and options persist, and commands are serialised, as in the
// daemon). The shell's stdout and stderr are pipes read by labelers that
// write each line, prefixed with 01 01 01 or 02 02 02, to the command's
// log (a final unterminated line gets a newline; lines over 64 KiB are
// split into marked pieces); after each command the shell prints a
// per-session random sentinel with $? on both pipes, which attributes
// output and records the exit code only once both streams drained. Async
// commands read stdin from a pipe that POST …/input writes to (echoed to
// the log unless suppressInputEcho). A top-level `exit` ends the shell:
// that command gets its status, later execs get 410 "gone: session
// process has exited". Output of background processes that outlive their
// command is attributed to whatever command runs next (the daemon gives
// each command its own FIFOs instead).
//
// Output formats follow X-Daytona-SDK-Version (and X-Daytona-Split-Output)
// as in docs/daytona.md#version-headers: ≥ 0.167.0 gets JSON with output (raw, with
// markers), stdout and stderr; 0.27–0.167 raw text with markers; older or
// no header, markers stripped. Log follow is a WebSocket
// (…/logs?follow=true) that replays from byte 0 in binary frames of at
// most 1024 bytes and closes 1000 once the command has exited and
// everything was sent; a plain GET with follow=true streams the stripped
// log over chunked HTTP.
//
// PTYs are real (github.com/creack/pty): an interactive login bash,
// output broadcast in binary frames, {"type":"control","status":"connected"}
// first, input frames written verbatim (64 KiB read limit), resize via
// HTTP, DELETE kills with SIGKILL, and the close frame carries the exit:
// 1000 {"exitCode":0} or 1011 {"exitCode":N,"exitReason":…}. Output while
// no client is attached is lost (hence lazyStart).
//
// Disk allocation: each sandbox has an allocation in bytes (its disk GiB,
// WithDiskBytes, or SetDiskAllocation). Toolbox writes (bulk upload,
// upload) stream through a counter against allocation minus the tree's
// current usage and fail like Daytona's daemon with "no space left on
// device" (bulk upload: 400 {"errors":["<path>: write: write <tmp>: no
// space left on device"],"files":[…]}; the partial temp file is removed).
// Commands cannot be given a real quota without privileges, so each
// session command and one-shot execute runs with `ulimit -S -f` set to the
// remaining allocation (1024-byte blocks, measured at dispatch) and
// SIGXFSZ ignored: a write past it fails with EFBIG, "File too large"
// (one of the disk-full signatures the plugin recognises), instead of
// ENOSPC. The limit is per file, not a total: many files each under it
// can still exceed the allocation. PTYs are not limited.
//
// # Fault injection
//
// Inject adds a rule; the first matching rule with uses left applies.
// Route is a template from the OpenAPI files, relative to the plane base
// ("/sandbox/{sandboxIdOrName}/start", "/process/session/{sessionId}/exec")
// or a concrete path; Sandbox is an id or name; Times 0 means always.
//
//	// 503 once on create, then normal service.
//	srv.Inject(daytonatest.Fault{Method: "POST", Route: "/sandbox", Times: 1, Status: 503})
//	// 429 with the bucket's Retry-After header.
//	srv.Inject(daytonatest.Fault{Route: "/sandbox/{sandboxIdOrName}", Status: 429,
//		Header: http.Header{"Retry-After-authenticated": {"1"}}, Times: 1})
//	// Uncertain create: the sandbox is allocated, the reply is a 500 (or Hang: true).
//	srv.Inject(daytonatest.Fault{Method: "POST", Route: "/sandbox", Perform: true, Status: 500, Times: 1})
//	// Lost delete reply: deleted, then the connection drops.
//	srv.Inject(daytonatest.Fault{Method: "DELETE", Route: "/sandbox/{sandboxIdOrName}", Perform: true, Drop: true, Times: 1})
//	// Hang until the client gives up; a slow reply; a hook the test releases.
//	srv.Inject(daytonatest.Fault{Route: "/process/execute", Hang: true})
//	srv.Inject(daytonatest.Fault{Route: "/files/bulk-upload", Delay: 2 * time.Second})
//	srv.Inject(daytonatest.Fault{Route: "/sandbox/{sandboxIdOrName}/stop", Gate: releaseCh})
//	// A download whose connection breaks after 1 MiB of body.
//	srv.Inject(daytonatest.Fault{Route: "/files/download", BodyCut: true, BodyCutAfterBytes: 1 << 20, Times: 1})
//	// Log follow sockets: cut after N bytes, silent, or closed before the final frame.
//	logs := "/process/session/{sessionId}/command/{commandId}/logs"
//	srv.Inject(daytonatest.Fault{Route: logs, WSClose: true, WSCloseAfterBytes: 100, Times: 1})
//	srv.Inject(daytonatest.Fault{Route: logs, WSSilent: true, Times: 1})
//	srv.Inject(daytonatest.Fault{Route: logs, WSDropFinal: true, Times: 1})
//	// Resume racing auto-stop: the start begins a stop and is refused with 409.
//	srv.Inject(daytonatest.Fault{Route: "/sandbox/{sandboxIdOrName}/start", RefuseStartWhileStopping: true, Times: 1})
//	// A setter that answers success but never takes effect.
//	srv.Inject(daytonatest.Fault{Route: "/sandbox/{sandboxIdOrName}/autostop/{interval}", Unsettled: true})
//	// Missing container (not a rule: a state of the sandbox).
//	srv.LoseContainer(id)
//
// Inject returns a *FaultHandle (Hits, Remove); ClearFaults removes all.
//
// # Observing and waiting
//
// Requests() is the request log (plane, method, route template, concrete
// path, query, headers with credentials redacted, sandbox id, status, fault
// applied; ResetRequests empties it); CountRequests(method, route)
// counts round trips; Dispatches()/CountDispatches(substr) record every
// command handed to a shell (session exec and one-shot execute), so a test
// can assert a command ran exactly once. Command/AwaitCommand read a
// session command's recorded output. Waiting is condition-based, never
// sleep-based: Await(ctx, cond) re-evaluates cond after every change in
// the server; AwaitState, AwaitGone, AwaitRequests and AwaitCommand are
// built on it.
package daytonatest
