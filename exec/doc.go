// Package exec runs commands in a Daytona sandbox with live output that is
// never lost, duplicated or re-run (docs/behavior.md#execute, docs/behavior.md#exited-fast-path, docs/behavior.md#silent-socket;
// docs/host.md#execute; docs/daytona.md#process). The provider wires it into
// environmentExecute; other packages import it as cmdexec.
//
// # Use
//
//	r := cmdexec.NewRunner(cmdexec.Options{})          // one per worker process
//	res, err := r.Execute(ctx, cmdexec.Target{Client: c, Sandbox: sb.Ref(), LeaseKey: scopeKey},
//		cmdexec.Request{Command: "npm", Args: []string{"test"}, Cwd: "/workspace", Timeout: 30 * time.Minute},
//		func(stream, text string) error { return sendExecuteLog(stream, text) })
//	r.CancelLease(scopeKey)            // releaseLease{cancelActiveWork}: in-flight executes end now
//	err = r.CloseLease(ctx, scopeKey)  // release/stop/destroy teardown: delete the session(s)
//
// # Command script (docs/behavior.md#command-script)
//
// Env keys are checked before any provider call. The script sources the
// login profiles, enters cwd and runs `env GIT_TERMINAL_PROMPT='0' … K='v'
// 'command' 'arg'… [< '/tmp/paperclip-stdin-<uuid>']` with every element
// single-quoted. stdin is uploaded first and always deleted afterwards.
// git push/fetch/pull/ls-remote/clone/remote update/submodule update are
// capped at GitNetworkTimeout with an actionable timeout message.
//
// # Two paths
//
// BypassSession runs one-shot (POST /process/execute, combined output as
// stdout, the daemon kills at the timeout) and never opens the session.
// Otherwise the lease's persistent session is used: opened once per lease
// key (single-flight: overlapping first commands share one create), wrapped
// in a subshell `( … )` so `exit` cannot end the session shell. A dispatch
// answered 404/410 (the session died with a sandbox restart) proves the
// command did not start: the session is recreated and the command
// dispatched once more; any other dispatch failure is uncertain and never
// retried (ErrDispatchUncertain).
//
// Concurrency: several executes may run on one lease at once. Control
// commands (the host sends them with bypassSession, which is what the
// independentControlCommands capability means) run one-shot beside a long
// session command and never wait for it. Two in-session commands share the
// one session and, as in the Daytona daemon, the session shell runs them
// one after another; this is the reference behaviour (one session per
// lease, test 81) and is kept.
//
// # Session path
//
//  1. Dispatch once with runAsync.
//  2. Already-exited fast path: one status read bounded to FastPathBound
//     (500 ms); an exit code means the final snapshot and no socket.
//  3. Follow the log over WebSocket; each connection also makes up to four
//     early status reads after 25/50/100/200 ms (each bounded to 500 ms);
//     an exit seen there ends the follow without waiting for the close.
//  4. A clean close is not an exit: the exit code is read, then re-read
//     after 50/100/200 ms; without one, reconnect once; after that poll
//     status then snapshot at most once per PollInterval.
//  5. A socket that delivers nothing for SilentSocketLimit (15 s) — also
//     one whose connection never completes — switches to polling; its late
//     callbacks are ignored (generation check) and it is closed before
//     Execute returns.
//  6. A completed result always has a recorded exit code, and a final
//     separated snapshot reconciles whatever the stream missed.
//
// Output is demultiplexed per stream at the byte level (daytona.Demuxer)
// and replays are dropped by per-stream byte offset. Snapshots are read as
// the raw marked log (not the JSON form, which holds the whole log and
// renders invalid bytes as U+FFFD), so they reconcile by the same byte
// offsets as the follow socket. Only complete UTF-8 characters reach
// the Sink (an incomplete tail is withheld until its continuation arrives
// or the exit is confirmed); invalid bytes become one U+FFFD each, exactly
// as in the final result, so the streamed text is always a prefix of the
// result and, for completed commands, equal to it.
//
// # Timeouts and cancellation
//
// Request.Timeout is enforced by the runner as the command deadline
// (docs/host.md#execute: the host's own limit is only 30 s later) and is also
// the bound of every observation read and the budget of the polling
// fallback after two failed connections. A timed-out result carries the
// partial output, stderr ends with the reason ("Command timed out after N
// s." or the git message or "Session log observation timed out …"), and
// metadata says timeoutScope ("command" | "session_log_observation"),
// commandExitConfirmed and observedExitCode. When the exit is not
// confirmed, the session is retired (later commands get a new session
// instead of queueing behind a runaway) and deleted — which kills the
// command — as soon as no other execute uses it.
//
// Deviation, deliberate: the reference has no overall deadline for a
// healthy stream (tests 102-104); here the command deadline applies in
// every phase, because a result after the host's limit is dropped anyway.
//
// CancelLease ends in-flight executes at once with their partial output
// and an error matching ErrLeaseNotActive; later executes on the key fail
// with it before any provider call, until ReopenLease.
//
// # Output cap
//
// Each stream of a result is capped at Options.OutputCap host characters
// (default DefaultOutputCap = 32 Mi, counted as the host counts the JSON
// frame: UTF-16 units after escaping, control characters 6). Beyond it the
// stream ends with a marker line stating how many characters (Unicode code
// points) were kept, which for text with escapes or non-ASCII characters is
// fewer than the cap; metadata.outputTruncated is true and further bytes are
// only counted. Live streaming stops at the same cap, so
// the streamed text stays a prefix of the result and the host's 128 Mi
// characters per execute are never reached (2 × 32 Mi + markers). Memory per
// execute is bounded by the cap: log snapshots (the final one, and each
// poll) are read as the raw marked log, streamed and demultiplexed, and
// reconciled by per-stream byte offset exactly like a reconnect, so no
// snapshot is ever held whole and binary output reconciles byte for byte.
// The one-shot answer is a single JSON value holding all the output; it is
// decoded as it arrives (daytona.ToolboxService.ExecuteStream) into the
// same capped output, so a one-shot printing hundreds of MiB still returns
// its exit code with a truncated result, and memory is set by the cap.
//
// # Clock
//
// Every timer comes from Options.Clock; exectest.FakeClock lets tests run a
// two-hour command or the 15 s silence without waiting.
//
// # Upstream test titles (docs/behavior.md#reference-tests) and the tests here
//
//	| ref # | title (short)                                              | test(s) in this package                                   |
//	|-------|------------------------------------------------------------|-----------------------------------------------------------|
//	| 80    | one session on the first execute, reused next              | TestSessionSeparatesStreamsAndReusesOneSession            |
//	| 81    | one session when two first commands overlap                | TestTwoFirstCommandsOpenOneSession                        |
//	| 82,83 | bypassSession one-shot, session opened on next in-run cmd  | TestBypassCommandLeavesSessionClosed                      |
//	| 84,89 | delete on release, store cleared, no orphan on 2nd teardown| TestSessionSeparatesStreamsAndReusesOneSession            |
//	| 87    | session delete failure logged, never thrown                | TestCloseLeaseReportsDeleteFailureWithoutPanicking        |
//	| 90    | store cleared when a restart destroyed the session         | TestForgetSessionsAfterRestartSeenByProvider, TestSessionRecreatedAfterSandboxRestart |
//	| 92,93 | session.open / session.close spans, failed span            | TestCloseLeaseReportsDeleteFailureWithoutPanicking (Options.Span) |
//	| 94,96 | runAsync dispatch, separate stdout/stderr, one shell, no bwrap | TestSessionSeparatesStreamsAndReusesOneSession        |
//	| 95    | subshell protects the session shell from exit              | TestSessionSeparatesStreamsAndReusesOneSession            |
//	| 97    | session timeout on the poll fallback without exit code     | TestPollFallbackTimeoutKeepsPartialOutput                 |
//	| 98,99 | one stream call + one final snapshot; exit read once       | TestOneStreamCallOneStatusReadOneSnapshot                 |
//	| 100   | running command survives a log-stream close (reconnect)    | TestSocketClosedMidLineMidMarkerMidCharacter              |
//	| 101,110 | poll after repeated closes / rejected stream             | TestReconnectOnceThenPoll                                 |
//	| 102,103 | hour-long commands, no invented exit or lifetime cap     | TestTwoHourCommandWithInjectedClock                       |
//	| 104   | fallback budget and partial output after failed streams    | TestPollFallbackTimeoutKeepsPartialOutput                 |
//	| 105   | provider status errors after a clean close are returned    | TestStatusReadFailsBeforeStreamAndAfterCleanClose         |
//	| 106   | bytes written after the socket closed are recovered        | TestCloseBeforeFinalFrameIsReconciledBySnapshot, TestLostFinalFrameReconciledByStreamedSnapshot |
//	| 107   | stalled status / snapshot / final snapshot bounded         | TestStatusHangAfterCleanCloseTimesOutWithPartialOutput, TestFinalSnapshotStallReportsConfirmedExit, TestStatusReadHangsIsBounded |
//	| 108   | streamed output kept when the status read times out        | TestStatusHangAfterCleanCloseTimesOutWithPartialOutput    |
//	| 109   | UTF-8 preserved through closes, genuine U+FFFD kept        | TestSocketClosedMidLineMidMarkerMidCharacter, TestBinaryAndMultibyteOutput, TestOutputNeverSplitsACharacter, TestOutputWithheldIncompleteTail |
//	| 111,112 | replayed prefix dropped by byte offset, chunks forwarded | TestOutputDedupesReplaysByOffset, TestSocketClosedMidLineMidMarkerMidCharacter |
//	| 113,117 | one-shot combined output, no bwrap/su                    | TestOneShotCombinedOutput                                 |
//	| 116   | stdin staged in the sandbox (several MiB), file removed    | TestStdinOfSeveralMiB, TestStdinFileRemovedWhenTheCommandFails |
//	| 118   | invalid env keys rejected before execution                 | TestInvalidEnvKeyRejectedBeforeAnyCall                    |
//	| 119   | timed-out result when the provider times out               | TestOneShotDaemonTimeout                                  |
//	| 120,122,123 | git defaults, env, cwd, profiles without nvm         | TestEnvCwdProfileAndGitDefaults, TestBuildScriptExact     |
//	| 121   | git network commands capped at 120 s, actionable message   | TestGitNetworkCommandCappedAndExplained, TestGitNetworkDetection |
//	| 129-132 | executes after cancellation rejected; cancel does not wait | TestCancelLeaseEndsInFlightAndRefusesLaterCalls        |
//	| fast path (docs/behavior.md#exited-fast-path) | already-exited fast path; early status reads               | TestFastPathCommandExitedBeforeFirstStatusRead, TestEarlyStatusReadEndsFollowWithoutWaitingForClose |
//	| silent socket (docs/behavior.md#silent-socket) | silent socket and never-connecting socket → polling        | TestSilentSocketSwitchesToPollingAfter15s                 |
//	| (new) | concurrent executes on one lease; control command beside a long one | TestManyConcurrentExecutesOnOneLease, TestControlCommandBesideLongCommand |
//	| (new) | output cap, memory bound                                   | TestOutputCapTruncatesWithMarker, TestOutputCapCountsHostCharacters, TestLargeOutputMemoryStaysBounded |
//	| (new) | one-shot answer streamed; marker states what was kept      | TestOneShotBeyondTheAnswerLimit, TestOneShotAnswerCutShort, TestTruncationMarkerStatesKeptCharacters |
//	| (new) | timeout retires and kills the runaway command's session    | TestCommandDeadlineRetiresSessionAndKillsCommand, TestCallerContextCancelledEndsPromptly |
//	| (new) | sandbox stopped mid-command: honest error, session recreated | TestSandboxStoppedMidCommandEndsWithHonestError         |
//
// Titles 85, 86, 88, 91, 114 (getDurationMs), 115 and the activity/teardown
// gates of 129-141 belong to the provider, which calls CloseLease,
// CancelLease and ForgetSessions. Every emulator test also checks that the
// command was dispatched exactly once and that no goroutine of this package
// (or a log follow) outlives the test.
package exec
