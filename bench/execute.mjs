// Execute benchmark through the real host path: the packaged worker behind
// its launcher, started by the real worker manager of @paperclipai/server
// 2026.916.1, against cmd/daytona-sim on loopback.
//
//   node bench/execute.mjs --launcher PATH --manifest PATH --sim PATH [--runs 7]
//        [--rtt 0,40,100] [--echo-runs 11] [--suite issue5,issue12] [--plain]
//        [--proxy] [--json FILE] [--markdown FILE] [--command TEXT] [--commit REV]
//
// Issue #5 measures (at 0 ms only; medians of --runs after one warm-up):
//   throughput  environmentExecute whose command prints 1 MiB of stdout, live
//               execute.log chunks delivered to the host sink; MiB/s of
//               result stdout over the whole call
//   latency     from the moment the sandbox command writes its first byte
//               (its own clock, date +%s%N) to that byte's execute.log
//               arriving at the host (same machine, same clock)
//   commands/s  100 sequential `true` on one lease, session path and
//               bypassSession (one-shot) path
//   peak RSS    VmHWM of the worker process after a command printed 100 MiB,
//               and of a fresh worker after 1 GiB (the output cap bounds it)
//
// The network measures (suite issue12; issues #12 and #27), at every --rtt:
// one sim per round trip, started with -rtt (every connection pays the
// round trip per direction, a new one its TCP handshake too), -tls (the API
// over https and wss, so a new connection also pays the TLS handshake; the
// worker trusts the sim's certificate through SSL_CERT_FILE; --plain turns
// it off) and -daemon-cost (the real daemon's labeler cost). For the
// session path and the one-shot path (bypassSession, the baseline) in the
// same run, the two paths alternating command by command, medians of
// --echo-runs (`echo hi`) or --runs commands after one warm-up each:
//   echo hi     ms, and round trips (ms / RTT)
//   1 / 8 MiB   `cat` of a generated 1 MiB and 8 MiB file
//   lines       `cat` of 100,000 short lines (seq)
//   labels      `cat` of a file holding NUL bytes and the daemon's stream
//               label bytes \x01\x01\x01 and \x02\x02\x02, no final newline
//   for each: session / one-shot as a ratio and as a difference in RTT
//   units; whether each path's stdout equals the expected bytes exactly;
//   the distinct values of result.metadata.logStream and how often each
//   came; API calls and new connections per command by operation
//   (dispatch, follow, status, snapshot, execute...) from the sim's request
//   log read before and after each command, and the TCP connections the
//   sim accepted while the measured commands ran (its X-Sim-Connections
//   count; the bench's own log reads reuse one connection).
//   floors      at 0 ms, next to the 8 MiB one-shot path and alternating
//               with it: what the same command costs without the worker.
//               host: the real worker manager calling a stand-in worker
//               (bench/floor-worker.mjs) that answers with the one-shot
//               path's own 8 MiB result, so only the host's side of the
//               pipe is timed; emulator: the same command line the worker
//               sends, POSTed to the sim's /process/execute from this
//               process, the answer read to its last byte. one-shot ms
//               minus the floors is the worker's share.
// --markdown writes the tables (for bench/BENCHMARKS.md).
//
// --latency is the old name of --rtt. With a sim build that has no -rtt
// the round trip falls back to -latency (a hold per request), and with
// --proxy (or a sim without a request log) to bench/simproxy.mjs in front
// of the sim, both plain HTTP.

import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { startProxy } from "./simproxy.mjs";

process.env.NODE_ENV = "production";
process.env.PAPERCLIP_LOG_LEVEL ??= "warn";
const here = path.dirname(fileURLToPath(import.meta.url));
const serverDist = path.join(here, "..", "interop", "node_modules", "@paperclipai", "server", "dist");
const { createPluginWorkerManager } = await import(pathToFileURL(path.join(serverDist, "services/plugin-worker-manager.js")).href);

const { values: opts } = parseArgs({
  options: {
    launcher: { type: "string" }, manifest: { type: "string" }, sim: { type: "string" },
    runs: { type: "string", default: "7" }, json: { type: "string" },
    "rss-sizes": { type: "string", default: "100,1024" },
    rtt: { type: "string" }, latency: { type: "string" }, "echo-runs": { type: "string", default: "11" },
    suite: { type: "string", default: "issue5,issue12" }, proxy: { type: "boolean", default: false },
    plain: { type: "boolean", default: false }, help: { type: "boolean", default: false },
    markdown: { type: "string" }, command: { type: "string" }, commit: { type: "string" },
  },
});
if (opts.help) {
  const text = readFileSync(fileURLToPath(import.meta.url), "utf8");
  console.log(text.slice(0, text.indexOf("\nimport ")).replace(/^\/\/ ?/gm, ""));
  process.exit(0);
}
const RUNS = Number(opts.runs);
const ECHO_RUNS = Number(opts["echo-runs"]);
const suites = new Set(opts.suite.split(","));
if (!(RUNS >= 1) || !(ECHO_RUNS >= 1)) throw new Error("--runs and --echo-runs must be at least 1");
// "40ms", "0.04s", "40" (ms), "0".
const parseMs = (s) => {
  const m = /^(\d+(?:\.\d+)?)(ms|s)?$/.exec(s.trim());
  if (!m) throw new Error(`bad --rtt ${JSON.stringify(s)} (want e.g. 0,40,100 or 0,40ms)`);
  return Number(m[1]) * (m[2] === "s" ? 1000 : 1);
};
const latencies = (opts.rtt ?? opts.latency ?? "0,40,100").split(",").map(parseMs);
const manifest = (await import(pathToFileURL(path.resolve(opts.manifest)).href)).default;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const nowNs = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
const MiB = 1048576;

// Whether this sim build has the -rtt, -tls and -latency flags (older
// builds do not).
const simHelp = spawnSync(opts.sim, ["-help"], { encoding: "utf8" });
const simHasLatency = /-latency\b/.test(simHelp.stdout ?? "");
const simHasRTT = /-rtt\b/.test(simHelp.stdout ?? "");
const simHasTLS = /-tls\b/.test(simHelp.stdout ?? "");
// The emulator's Daytona layout starts every one-shot command through a
// fresh mount namespace (docs/emulator.md#sandbox-layout), a per-process
// cost real Daytona does not have and that would count against the
// one-shot path only; the benchmarks compare the worker's paths, so they
// run on the host layout.
const simHasIsolation = /-isolation\b/.test((simHelp.stdout ?? "") + (simHelp.stderr ?? ""));
// The real daemon's labeler costs 10-100x what the emulator's does on the
// session path (docs/emulator.md#labeler-cost): a figure measured without
// it is not a result, so every run charges it when the build can.
const simHasDaemonCost = /-daemon-cost\b/.test((simHelp.stdout ?? "") + (simHelp.stderr ?? ""));

async function startSim(latencyMs) {
  const args = ["-stop-on-eof"];
  if (simHasIsolation) args.push("-isolation", "off");
  if (simHasDaemonCost) args.push("-daemon-cost");
  const useTLS = simHasTLS && !opts.plain && !opts.proxy;
  if (useTLS) args.push("-tls");
  if (latencyMs > 0 && !opts.proxy) {
    if (simHasRTT) args.push("-rtt", `${latencyMs}ms`);
    else if (simHasLatency) args.push("-latency", `${latencyMs}ms`);
  }
  const child = spawn(opts.sim, args, { stdio: ["pipe", "pipe", "inherit"] });
  const line = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) resolve(out.slice(0, out.indexOf("\n")));
    });
    child.once("exit", () => reject(new Error("daytona-sim exited")));
  });
  const ready = JSON.parse(line);
  const sim = { child, toolboxProxyUrl: ready.toolboxProxyUrl, config: { apiUrl: ready.apiUrl, apiKey: ready.apiKey, timeoutMs: 600000 } };
  // The bench's own requests to the sim: one kept-alive connection, which
  // trusts the sim's certificate under -tls.
  sim.caCertFile = ready.caCertFile;
  sim.agentOptions = { keepAlive: true, maxSockets: 1, ...(ready.caCertFile ? { ca: readFileSync(ready.caCertFile) } : {}) };
  sim.agent = ready.apiUrl.startsWith("https:") ? new https.Agent(sim.agentOptions) : new http.Agent(sim.agentOptions);
  sim.workerEnv = ready.caCertFile ? { SSL_CERT_FILE: ready.caCertFile } : {};
  sim.log = await simLog(sim);
  sim.latencyVia = latencyMs === 0 ? "none" : args.includes("-rtt") ? "daytona-sim -rtt (per direction, handshakes charged)" : "daytona-sim -latency (a hold per request)";
  sim.tls = useTLS;
  if (latencyMs > 0 && !args.includes("-rtt") && !args.includes("-latency")) {
    // Everything, timed and counted, goes through the proxy.
    sim.proxy = await startProxy({ target: new URL(ready.apiUrl).origin, latencyMs });
    sim.config = { ...sim.config, apiUrl: sim.proxy.rewrite(ready.apiUrl) };
    sim.latencyVia = "bench/simproxy.mjs";
    // The proxy's log, not the sim's: the sim sees the proxy's pooled
    // connections, the proxy the worker's own.
    sim.log = proxyLog(sim.proxy);
  }
  return sim;
}

// request sends one request with agent (http or https by the URL) and
// resolves to { status, headers, body } once the answer has ended.
function request(url, { method = "GET", headers = {}, body, agent } = {}) {
  const u = new URL(url);
  const mod = u.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(u, { method, agent, headers: body === undefined ? headers : { ...headers, "content-length": Buffer.byteLength(body) } }, (resp) => {
      const chunks = [];
      resp.on("data", (d) => chunks.push(d));
      resp.on("end", () => resolve({ status: resp.statusCode, headers: resp.headers, body: Buffer.concat(chunks) }));
      resp.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

// The sim's request log, or null when this build has none. ?since=N skips
// the first N entries ever logged; the log's own reads are not logged.
async function simLog(sim) {
  const url = `${sim.config.apiUrl}/__sim/requests`;
  let conns = null;
  const get = async (since) => {
    const resp = await request(`${url}?since=${since}`, { headers: { authorization: `Bearer ${sim.config.apiKey}` }, agent: sim.agent });
    if (resp.status !== 200) throw new Error(`${url}: ${resp.status}`);
    const body = JSON.parse(resp.body.toString("utf8"));
    if (!Array.isArray(body)) throw new Error(`${url}: not a JSON array`);
    // X-Sim-Connections: TCP connections the sim accepted so far.
    const c = Number(resp.headers["x-sim-connections"]);
    if (Number.isFinite(c)) conns = c;
    return body;
  };
  let seen;
  try {
    seen = (await get(0)).length;
  } catch {
    return null;
  }
  return {
    source: "daytona-sim GET <apiUrl>/__sim/requests",
    mark: async () => (seen += (await get(seen)).length),
    since: get,
    // The sim's accepted connections as of the last read (null: not told).
    connections: () => conns,
  };
}

function proxyLog(proxy) {
  return { source: "bench/simproxy.mjs", mark: async () => proxy.requests().length, since: async (n) => proxy.requests(n), connections: () => null };
}

function stopSim(sim) {
  sim.agent?.destroy();
  sim.proxy?.close();
  sim.counting?.close();
  sim.child.stdin.end();
}

let seq = 0;
// env reaches the worker process (SSL_CERT_FILE for a sim under -tls).
async function startWorker(manager, env = {}) {
  const handle = await manager.startWorker(`00000000-0000-4000-8000-${String(++seq).padStart(12, "0")}`, {
    entrypointPath: opts.launcher, manifest, config: {},
    instanceInfo: { instanceId: "bench", hostVersion: "2026.916.1" }, apiVersion: 1, databaseNamespace: null,
    hostHandlers: {}, autoRestart: false, env,
  });
  return handle;
}

const base = (config) => ({ driverKey: "daytona", companyId: "bench-company", environmentId: "bench-env", issueId: null, config });

async function acquire(handle, config) {
  const lease = await handle.call("environmentAcquireLease", { ...base(config), runId: "bench-run", agentId: "bench-agent",
    executionWorkspaceId: "bench-ws", adapterType: "claude_local" }, 630000);
  return { lease, leaseConfig: { ...config, ...lease.metadata } };
}

async function execute(handle, l, script, { bypassSession = false, onLog } = {}) {
  return handle.call("environmentExecute", { ...base(l.leaseConfig), lease: l.lease, command: "bash", args: ["-c", script],
    timeoutMs: 600000, bypassSession }, 630000, onLog ?? (() => {}));
}

async function release(handle, l) {
  await handle.call("environmentDestroyLease", { ...base(l.leaseConfig), providerLeaseId: l.lease.providerLeaseId,
    leaseMetadata: l.lease.metadata }, 630000);
}

const vmHWM = (pid) => Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) / 1024;

// ---- issue #12 -----------------------------------------------------------

// The operation a request log entry is, named for the report: the sim logs
// route templates, the proxy raw paths; both reduce to the same names.
function opKind(e) {
  let p = String(e.route).split("?")[0].replace(/^\/api(?=\/)/, "").replace(/^\/proxy\/toolbox\/[^/]+/, "");
  const m = e.method;
  if (/^\/process\/session\/[^/]+\/exec$/.test(p)) return "dispatch";
  if (/^\/process\/session\/[^/]+\/command\/[^/]+\/logs$/.test(p)) return e.webSocket ? "follow" : "snapshot";
  if (/^\/process\/session\/[^/]+\/command\/[^/]+$/.test(p)) return "status";
  if (p === "/process/execute") return "execute";
  if (p === "/process/session") return m === "POST" ? "create session" : "list sessions";
  if (/^\/process\/session\/[^/]+$/.test(p)) return m === "DELETE" ? "delete session" : "get session";
  if (/^\/sandbox\/[^/]+\/last-activity$/.test(p)) return "last-activity";
  if (/^\/sandbox\/[^/]+\/toolbox-proxy-url$/.test(p)) return "toolbox URL";
  if (/^\/sandbox\/[^/]+$/.test(p) && m === "GET") return "get sandbox";
  return `${m} ${p.replace(/\/sandbox\/[^/{]+/, "/sandbox/{id}")}`;
}

// Requests of one command: calls and new connections per operation.
function tally(entries) {
  const ops = {};
  let newConns = 0;
  let newConnsWS = 0;
  for (const e of entries) {
    const k = opKind(e);
    ops[k] = (ops[k] ?? 0) + 1;
    if (e.newConn) newConns++;
    // An upgraded connection is the WebSocket's alone: it is never pooled.
    if (e.newConn && e.webSocket) newConnsWS++;
  }
  return { calls: entries.length, newConns, newConnsWS, ops };
}

// Mean calls per operation, median calls and new connections, over commands.
function summarize(tallies) {
  if (tallies.length === 0) return null;
  const ops = {};
  for (const t of tallies) for (const [k, n] of Object.entries(t.ops)) ops[k] = (ops[k] ?? 0) + n;
  for (const k of Object.keys(ops)) ops[k] /= tallies.length;
  return {
    commands: tallies.length,
    callsMedian: median(tallies.map((t) => t.calls)), callsMean: tallies.reduce((a, t) => a + t.calls, 0) / tallies.length,
    newConnsMedian: median(tallies.map((t) => t.newConns)), newConnsMean: tallies.reduce((a, t) => a + t.newConns, 0) / tallies.length,
    newConnsWSMean: tallies.reduce((a, t) => a + t.newConnsWS, 0) / tallies.length,
    ops,
  };
}

const PATHS = [["session", false], ["oneShot", true]];

// One scenario: `runs` measured commands per path after one warm-up each,
// the paths alternating so that load drift hits both alike, and taking
// turns at going first in a round, so that neither always follows the
// work of the round before (the extras: the floors parse and read 8 MiB
// in this process, the host's, just before the next round). check throws on
// a result that is no result (a failed command); expected (a string, may
// be undefined) is what stdout must equal exactly, recorded per path, not
// thrown; log (may be null) counts the requests of each command and the
// connections the sim accepted over the measured rounds. extras ([name,
// fn] pairs, e.g. the floors) run after the paths in every round: fn gets
// this round's one-shot result and returns its ms.
async function scenario(handle, l, log, script, runs, check, extras = [], expected = undefined) {
  const out = {};
  for (const [name] of PATHS) out[name] = { ms: [], tallies: [], exact: 0, inexact: 0, logStreams: {} };
  for (const [name] of extras) out[name] = { ms: [] };
  let connsAtStart = null;
  for (let i = 0; i <= runs; i++) {
    let oneShot;
    for (const [name, bypassSession] of i % 2 === 0 ? PATHS : [...PATHS].reverse()) {
      const mark = log ? await log.mark() : 0;
      if (i === 1 && connsAtStart === null) connsAtStart = log?.connections() ?? null;
      let live = 0;
      const t0 = performance.now();
      const r = await execute(handle, l, script, { bypassSession, onLog: (stream, chunk) => { live += chunk.length; } });
      const ms = performance.now() - t0;
      check(r);
      if (bypassSession) oneShot = r;
      if (i === 0) continue;
      const o = out[name];
      o.ms.push(ms);
      o.bytes = r.stdout.length;
      o.liveShare = live / Math.max(1, r.stdout.length);
      if (expected !== undefined) {
        if (r.stdout === expected) o.exact++;
        else {
          o.inexact++;
          o.firstDiff ??= firstDiff(r.stdout, expected);
        }
      }
      const ls = String(r.metadata?.logStream ?? "(none)");
      o.logStreams[ls] = (o.logStreams[ls] ?? 0) + 1;
      if (log) o.tallies.push(tally(await log.since(mark)));
    }
    for (const [name, fn] of extras) {
      const ms = await fn(oneShot);
      if (i > 0) out[name].ms.push(ms);
    }
  }
  if (log) await log.mark();
  const connsAtEnd = log?.connections() ?? null;
  out.acceptedConnections = connsAtStart === null || connsAtEnd === null ? null : connsAtEnd - connsAtStart;
  return out;
}

// firstDiff describes where got first differs from want (lengths in
// UTF-16 units, which are bytes for these ASCII outputs).
function firstDiff(got, want) {
  let i = 0;
  while (i < got.length && i < want.length && got[i] === want[i]) i++;
  const show = (x) => JSON.stringify(x.slice(Math.max(0, i - 8), i + 8));
  return `length ${got.length} vs ${want.length}, first difference at ${i}: got ${show(got)}, want ${show(want)}`;
}

// The command line the worker sends for `bash -c script` in cwd on its
// one-shot path (exec/script.go, buildScript): the login profiles, cd,
// env with the git defaults, the command quoted. Rebuilt here so that the
// emulator floor runs what the worker's one-shot runs.
const shq = (s) => `'${s.replaceAll("'", `'"'"'`)}'`;
const PROFILE_PRELUDE = `if [ -f /etc/profile ]; then . /etc/profile >/dev/null 2>&1 || true; fi` +
  ` && if [ -f "$HOME/.profile" ]; then . "$HOME/.profile" >/dev/null 2>&1 || true; fi` +
  ` && if [ -f "$HOME/.bash_profile" ]; then . "$HOME/.bash_profile" >/dev/null 2>&1 || true; elif [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc" >/dev/null 2>&1 || true; fi` +
  ` && if [ -f "$HOME/.zprofile" ]; then . "$HOME/.zprofile" >/dev/null 2>&1 || true; fi`;
const workerCommandLine = (cwd, script) => `${PROFILE_PRELUDE} && cd ${shq(cwd)} && env GIT_TERMINAL_PROMPT=${shq("0")}` +
  ` GCM_INTERACTIVE=${shq("Never")} GIT_ASKPASS=${shq("echo")} SSH_ASKPASS=${shq("echo")} SSH_ASKPASS_REQUIRE=${shq("force")}` +
  ` ${shq("bash")} ${shq("-c")} ${shq(script)}`;

// The floors of one command (see the header): [name, fn] extras for
// scenario, and close() to stop the stand-in worker. The stand-in starts at
// the first round (a warm-up), with that round's one-shot result.
function floors(manager, sim, l, script, check) {
  let fake = null;
  let dir = null;
  const host = async (oneShot) => {
    if (!fake) {
      dir = mkdtempSync(path.join(os.tmpdir(), "bench-floor-"));
      const file = path.join(dir, "result.json");
      writeFileSync(file, JSON.stringify(oneShot));
      fake = await manager.startWorker(`00000000-0000-4000-8000-${String(++seq).padStart(12, "0")}`, {
        entrypointPath: path.join(here, "floor-worker.mjs"), manifest, config: {},
        instanceInfo: { instanceId: "bench", hostVersion: "2026.916.1" }, apiVersion: 1, databaseNamespace: null,
        hostHandlers: {}, autoRestart: false, env: { FLOOR_RESULT: file },
      });
    }
    const t0 = performance.now();
    const r = await execute(fake, l, script, { bypassSession: true, onLog: () => {} });
    const ms = performance.now() - t0;
    check(r);
    return ms;
  };
  const url = new URL(`${sim.toolboxProxyUrl}/${l.lease.providerLeaseId}/process/execute`);
  const agent = url.protocol === "https:" ? new https.Agent(sim.agentOptions) : new http.Agent(sim.agentOptions);
  const body = JSON.stringify({ command: workerCommandLine(l.lease.metadata.remoteCwd, script), timeout: 600 });
  const emulator = async () => {
    const t0 = performance.now();
    const resp = await request(url, { method: "POST", agent, body, headers: { authorization: `Bearer ${sim.config.apiKey}`, "content-type": "application/json" } });
    const ms = performance.now() - t0;
    const tail = resp.body.subarray(-2).toString();
    if (resp.status !== 200 || resp.body.length < 8 * MiB || tail !== '"}') throw new Error(`emulator floor: ${resp.status}, ${resp.body.length} bytes`);
    return ms;
  };
  return {
    ways: [["hostFloor", host], ["emulatorFloor", emulator]],
    close: async () => {
      agent.destroy();
      await fake?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

// The cases after `echo hi`: [key, label, file, expected stdout]. The files
// are generated in the sandbox once per lease; the expected bytes here.
const lineOf = (ch) => `${ch.repeat(1023)}\n`;
const CASES = [
  ["mib1", "1 MiB", "bench-1mib.txt", lineOf("a").repeat(1024)],
  ["mib8", "8 MiB", "bench-8mib.txt", lineOf("b").repeat(8 * 1024)],
  ["lines", "100,000 short lines", "bench-lines.txt", Array.from({ length: 100000 }, (_, i) => `${i + 1}\n`).join("")],
  ["labels", "NUL and label bytes", "bench-labels.bin", "x\0y\n\x01\x01\x01out\n\x02\x02\x02err\n\0\n\x01\x01\x01\x02\x02\x02"],
];
const MAKE_FILES = (dir) => [
  `head -c ${MiB} /dev/zero | tr '\\0' 'a' | fold -w 1023 | head -c ${MiB} > '${dir}/bench-1mib.txt'`,
  `head -c ${8 * MiB} /dev/zero | tr '\\0' 'b' | fold -w 1023 | head -c ${8 * MiB} > '${dir}/bench-8mib.txt'`,
  `seq 1 100000 > '${dir}/bench-lines.txt'`,
  `printf 'x\\000y\\n\\001\\001\\001out\\n\\002\\002\\002err\\n\\000\\n\\001\\001\\001\\002\\002\\002' > '${dir}/bench-labels.bin'`,
].join(" && ");

// withFloors ({manager, sim}, at 0 ms only) adds the floors to the 8 MiB
// scenario.
async function issue12(handle, l, latencyMs, log, countOnly = false, withFloors = null) {
  const dir = l.lease.metadata.remoteCwd;
  const made = await execute(handle, l, MAKE_FILES(dir), { bypassSession: true });
  if (made.exitCode !== 0) throw new Error(`making the bench files: ${JSON.stringify(made).slice(0, 300)}`);
  const runs = countOnly ? 2 : RUNS;
  const res = { latencyMs };
  const ok = (what) => (r) => {
    if (r.exitCode !== 0) throw new Error(`${what}: ${JSON.stringify(r).slice(0, 300)}`);
  };
  const sc = {};
  sc.echo = await scenario(handle, l, log, "echo hi", countOnly ? 5 : ECHO_RUNS, (r) => {
    if (r.stdout !== "hi\n" || r.exitCode !== 0) throw new Error(`echo hi: ${JSON.stringify(r).slice(0, 300)}`);
  }, [], "hi\n");
  for (const [key, label, file, expected] of CASES) {
    const script = `cat '${dir}/${file}'`;
    const fl = withFloors && key === "mib8" ? floors(withFloors.manager, withFloors.sim, l, script, ok(label)) : null;
    try {
      sc[key] = await scenario(handle, l, log, script, runs, ok(label), fl?.ways ?? [], expected);
    } finally {
      await fl?.close();
    }
    if (fl) sc[key].floors = true;
  }
  for (const [key, bytes] of [["echo", 0], ...CASES.map(([k, , , e]) => [k, e.length])]) {
    res[key] = { acceptedConnections: sc[key].acceptedConnections };
    for (const [name] of PATHS) {
      const x = sc[key][name];
      const ms = median(x.ms);
      res[key][name] = { medianMs: ms, runs: x.ms.length, samplesMs: x.ms.map((t) => Math.round(t * 10) / 10),
        requests: summarize(x.tallies), exact: x.exact, inexact: x.inexact, firstDiff: x.firstDiff, logStreams: x.logStreams };
      if (latencyMs > 0) res[key][name].roundTrips = ms / latencyMs;
      if (bytes >= MiB) {
        res[key][name].MiBs = bytes / MiB / (ms / 1000); // the rate of the median command
        res[key][name].liveShare = x.liveShare;
      }
    }
    res[key].ratioSessionToOneShot = res[key].session.medianMs / res[key].oneShot.medianMs;
    res[key].diffMs = res[key].session.medianMs - res[key].oneShot.medianMs;
    if (latencyMs > 0) res[key].diffRoundTrips = res[key].diffMs / latencyMs;
  }
  const m8 = sc.mib8;
  if (m8.floors) {
    const f = {};
    for (const k of ["hostFloor", "emulatorFloor"]) {
      f[k] = { medianMs: median(m8[k].ms), runs: m8[k].ms.length, samplesMs: m8[k].ms.map((t) => Math.round(t * 10) / 10) };
    }
    f.sumMs = f.hostFloor.medianMs + f.emulatorFloor.medianMs;
    f.boundMiBs = 8 / (f.sumMs / 1000); // the best rate this machine allows without the worker's own time
    // The share per round (that round's one-shot minus that round's
    // floors, so load that hits a round hits all three), then the median.
    const shares = m8.oneShot.ms.map((t, i) => t - m8.hostFloor.ms[i] - m8.emulatorFloor.ms[i]);
    f.workerShareSamplesMs = shares.map((t) => Math.round(t * 10) / 10);
    f.workerShareMs = median(shares);
    f.workerShareOfOneShot = median(shares.map((t, i) => t / m8.oneShot.ms[i]));
    res.mib8.floors = f;
  }
  return res;
}

// ---- issue #5 (0 ms) -----------------------------------------------------

async function issue5(handle, l, sim, results) {
  // Throughput of a 1 MiB stdout result, with live streaming. The payload
  // is made once; each measured command is one `cat`, so the shell pipeline
  // costs as little as possible next to the path being measured.
  const payload = `${l.lease.metadata.remoteCwd}/bench-1mib.txt`;
  await execute(handle, l, `head -c 1048576 /dev/zero | tr '\\0' 'a' | fold -w 1023 | head -c 1048576 > '${payload}'`);
  const oneMiB = `cat '${payload}'`;
  const rates = [];
  for (let i = 0; i <= RUNS; i++) {
    let live = 0;
    const t0 = performance.now();
    const r = await execute(handle, l, oneMiB, { onLog: (stream, chunk) => { live += chunk.length; } });
    const dt = (performance.now() - t0) / 1000;
    if (r.stdout.length < 1048576 || !r.stdout.startsWith("a")) throw new Error(`short stdout ${r.stdout.length}`);
    if (i > 0) rates.push(r.stdout.length / 1048576 / dt);
    if (i === RUNS) results.liveShare = live / r.stdout.length;
  }
  results.throughputMiBs = median(rates);
  const oneShotRates = [];
  for (let i = 0; i <= RUNS; i++) {
    const t0 = performance.now();
    const r = await execute(handle, l, oneMiB, { bypassSession: true });
    const dt = (performance.now() - t0) / 1000;
    if (i > 0) oneShotRates.push(r.stdout.length / 1048576 / dt);
  }
  results.throughputOneShotMiBs = median(oneShotRates);

  // Baseline in the same run: the same command through the toolbox's
  // one-shot execute, straight from this process (no worker, no host
  // manager), so the ratio shows what the worker path costs on top of the
  // emulator and the shell pipeline themselves.
  const tbUrl = `${sim.toolboxProxyUrl}/${l.lease.providerLeaseId}/process/execute`;
  const baseRates = [];
  for (let i = 0; i <= RUNS; i++) {
    const t0 = performance.now();
    const resp = await request(tbUrl, { method: "POST", agent: sim.agent, headers: { authorization: `Bearer ${sim.config.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ command: oneMiB, timeout: 600 }) });
    const body = JSON.parse(resp.body.toString("utf8"));
    const dt = (performance.now() - t0) / 1000;
    if (body.result.length < 1048576) throw new Error("short baseline");
    if (i > 0) baseRates.push(body.result.length / 1048576 / dt);
  }
  results.baselineToolboxOneShotMiBs = median(baseRates);
  results.ratioToBaseline = results.throughputMiBs / results.baselineToolboxOneShotMiBs;

  // Larger output (8 MiB) amortises the per-command cost (process start,
  // profile sourcing): closer to the data path's own rate.
  const eight = [];
  for (let i = 0; i <= Math.min(RUNS, 3); i++) {
    const t0 = performance.now();
    const r = await execute(handle, l, "head -c 8388608 /dev/zero | tr '\\0' 'a' | fold -w 1023", { onLog: () => {} });
    const dt = (performance.now() - t0) / 1000;
    if (i > 0) eight.push(r.stdout.length / 1048576 / dt);
  }
  results.throughput8MiBMiBs = median(eight);

  // First byte in the sandbox -> execute.log at the host.
  const lat = [];
  for (let i = 0; i <= RUNS; i++) {
    let first = null;
    await execute(handle, l, `printf 'T%s\\n' "$(date +%s%N)"; sleep 0.3`, {
      onLog: (stream, chunk) => {
        if (first === null && chunk.startsWith("T")) first = Number(nowNs() - BigInt(chunk.slice(1).trim())) / 1e6;
      },
    });
    if (i > 0 && first !== null) lat.push(first);
  }
  results.firstByteMs = median(lat);

  // Commands per second on one lease.
  for (const [name, bypassSession] of [["session", false], ["oneShot", true]]) {
    const n = 100;
    await execute(handle, l, "true", { bypassSession });
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await execute(handle, l, "true", { bypassSession });
    results[`commandsPerSecond_${name}`] = n / ((performance.now() - t0) / 1000);
  }
}

async function peakRSS(manager, sim) {
  const out = {};
  for (const mib of opts["rss-sizes"].split(",").map(Number)) {
    const h = await startWorker(manager, sim.workerEnv);
    const pid = h.diagnostics().pid;
    const base0 = vmHWM(pid);
    const lw = await acquire(h, sim.config);
    const r = await execute(h, lw, `head -c ${mib * 1048576} /dev/zero | tr '\\0' 'a' | fold -w 4095`);
    out[`${mib}MiB`] = { beforeMiB: base0, peakMiB: vmHWM(pid), truncated: r.metadata?.outputTruncated === true,
      resultStdoutMiB: r.stdout.length / 1048576 };
    await release(h, lw);
    await h.stop();
  }
  return out;
}

// ---- report --------------------------------------------------------------

function machine() {
  const cpu = (/^model name\s*:\s*(.*)$/m.exec(readFileSync("/proc/cpuinfo", "utf8")) ?? [])[1] ?? os.arch();
  return `${os.cpus().length} cores (${cpu}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Linux ${os.release()}, Node ${process.version}`;
}

function commit() {
  try {
    const rev = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: here, encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain"], { cwd: here, encoding: "utf8" }).trim() !== "";
    return dirty ? `${rev} (with uncommitted changes)` : rev;
  } catch {
    return "unknown";
  }
}

const f0 = (x) => (x === undefined || x === null ? "–" : x.toFixed(0));
const f1 = (x) => (x === undefined || x === null ? "–" : x.toFixed(1));
const f2 = (x) => (x === undefined || x === null ? "–" : x.toFixed(2));
const signed = (x, f) => (x < 0 ? `−${f(-x)}` : `+${f(x)}`);
const holds = (ok) => (ok === null ? "–" : ok ? "**holds**" : "not met");
const lat = (r) => `${r.latencyMs} ms`;

function opsText(s) {
  if (!s) return "–";
  return Object.entries(s.ops).sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `${Number.isInteger(n) ? n : n.toFixed(2)} ${k}`).join(" + ");
}

// logStream values and how often each came: "a ×7, b ×4".
const streamsText = (m) => Object.entries(m ?? {}).sort((a, b) => b[1] - a[1]).map(([k, n]) => `\`${k}\` ×${n}`).join(", ") || "–";
const exactText = (x) => (x.exact + x.inexact === 0 ? "–" : x.inexact === 0 ? `yes (${x.exact}/${x.exact})` : `**no** (${x.exact}/${x.exact + x.inexact})`);

function markdown(results) {
  const rs = results.latency;
  const L = [];
  L.push(`Reproduce: \`${results.command}\``, "");
  L.push(`Commit ${results.commit}; ${results.machine}; load average ${results.loadAverage} when the runs started` +
    ` (${results.startedAt}). Round trip via ${[...new Set(rs.filter((r) => r.latencyMs > 0).map((r) => r.latencyVia))].join(", ") || "–"};` +
    ` API over ${rs.every((r) => r.tls) ? "TLS (https, wss)" : rs.some((r) => r.tls) ? "TLS for some runs" : "plain HTTP"}; the daemon's labeler cost on;` +
    ` requests counted by ${[...new Set(rs.map((r) => r.requestLog))].join(", ")}. Medians; \`echo hi\` of ${ECHO_RUNS}` +
    ` commands, the others of ${RUNS}, per path, after one warm-up each, the two paths alternating.`, "");

  L.push("`echo hi`:", "");
  L.push("| RTT | session | one-shot | API calls per command (session / one-shot) | new connections per command after warm-up (session / one-shot) | TCP connections accepted while measuring | `logStream` (session) |",
    "| --- | --- | --- | --- | --- | --- | --- |");
  for (const r of rs) {
    const e = r.echo;
    const t = (x) => `${f1(x.medianMs)} ms${r.latencyMs > 0 ? ` = ${f2(x.roundTrips)} RTT` : ""}`;
    const q = (x) => (x.requests ? f1(x.requests.callsMean) : "–");
    const n = (x) => (x.requests ? f2(x.requests.newConnsMean) : "–");
    L.push(`| ${lat(r)} | ${t(e.session)} | ${t(e.oneShot)} | ${q(e.session)} / ${q(e.oneShot)} | ${n(e.session)} / ${n(e.oneShot)} | ${e.acceptedConnections ?? "–"} | ${streamsText(e.session.logStreams)} |`);
  }
  L.push("", "Output (`cat` of a generated file); the session path next to the one-shot path of the same run:", "");
  L.push("| RTT | output | session | one-shot | session / one-shot | difference | session bytes exact | one-shot bytes exact | `logStream` (session) |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const r of rs) {
    for (const [k, label] of CASES) {
      const c = r[k];
      const diff = `${signed(c.diffMs, f0)} ms${r.latencyMs > 0 ? ` = ${signed(c.diffRoundTrips, f2)} RTT` : ""}`;
      L.push(`| ${lat(r)} | ${label} | ${f0(c.session.medianMs)} ms | ${f0(c.oneShot.medianMs)} ms | ${f2(c.ratioSessionToOneShot)}× | ${diff} | ${exactText(c.session)} | ${exactText(c.oneShot)} | ${streamsText(c.session.logStreams)} |`);
    }
  }
  for (const r of rs) {
    for (const [k, label] of CASES) {
      for (const [p] of PATHS) if (r[k][p].firstDiff) L.push("", `${lat(r)}, ${label}, ${p}: ${r[k][p].firstDiff}`);
    }
  }
  const fl = rs.find((r) => r.mib8.floors)?.mib8.floors;
  if (fl) {
    L.push("", `8 MiB floors at 0 ms (the same command without the worker, same rounds): host alone ${f1(fl.hostFloor.medianMs)} ms,` +
      ` emulator alone ${f1(fl.emulatorFloor.medianMs)} ms; the worker's share of the one-shot time ${signed(fl.workerShareMs, f1)} ms (${signed(100 * fl.workerShareOfOneShot, f0)} %).`);
  }
  L.push("", "API calls per command by operation (mean over the measured commands) and new connections (of them for", "WebSocket upgrades, which cannot reuse a pooled connection):", "");
  L.push("| RTT | path | command | calls per command | new connections (WebSocket) | by operation |", "| --- | --- | --- | --- | --- | --- |");
  for (const r of rs) {
    for (const [k, label] of [["echo", "`echo hi`"], ...CASES.map(([key, lab]) => [key, lab])]) {
      for (const [p] of PATHS) {
        const x = r[k][p].requests;
        if (!x) continue;
        L.push(`| ${lat(r)} | ${p === "session" ? "session" : "one-shot"} | ${label} | ${f1(x.callsMean)} (median ${x.callsMedian}) | ${f1(x.newConnsMean)} (${f1(x.newConnsWSMean)}) | ${opsText(x)} |`);
      }
    }
  }
  // Issue #27's bars.
  L.push("", "The bars of issue #27:", "", "| bar | measured | |", "| --- | --- | --- |");
  for (const [rt, most] of [[40, 2.0], [100, 1.5]]) {
    const r = rs.find((x) => x.latencyMs === rt);
    if (r) L.push(`| \`echo hi\` at ${rt} ms: session median ≤ ${most} RTT | ${f2(r.echo.session.roundTrips)} RTT | ${holds(r.echo.session.roundTrips <= most)} |`);
  }
  for (const r of rs) {
    const x = r.echo.session.requests;
    if (!x) continue;
    L.push(`| \`echo hi\` at ${lat(r)}: median ≤ 2 API calls, 0 new connections after warm-up | ${f1(x.callsMean)} calls, ${f2(x.newConnsMean)} new connections, ${r.echo.acceptedConnections ?? "–"} accepted | ${holds(x.callsMedian <= 2 && x.newConnsMean === 0 && (r.echo.acceptedConnections ?? 0) === 0)} |`);
  }
  const at = (ms) => rs.find((x) => x.latencyMs === ms);
  for (const k of ["mib1", "mib8"]) {
    const label = CASES.find(([key]) => key === k)[1];
    if (at(0)) L.push(`| ${label} at 0 ms: session ≤ 1.5× one-shot | ${f2(at(0)[k].ratioSessionToOneShot)}× | ${holds(at(0)[k].ratioSessionToOneShot <= 1.5)} |`);
    if (at(40)) L.push(`| ${label} at 40 ms: session ≤ one-shot + 1 RTT (+10 %) | ${signed(at(40)[k].diffRoundTrips, f2)} RTT | ${holds(at(40)[k].diffRoundTrips <= 1.1)} |`);
  }
  for (const r of rs) {
    L.push(`| 100,000 lines at ${lat(r)}: session ≤ 1.5× one-shot | ${f2(r.lines.ratioSessionToOneShot)}× | ${holds(r.lines.ratioSessionToOneShot <= 1.5)} |`);
    L.push(`| NUL and label bytes at ${lat(r)}: exact on the session path | ${exactText(r.labels.session)} | ${holds(r.labels.session.inexact === 0)} |`);
  }
  return `${L.join("\n")}\n`;
}

// ---- main ----------------------------------------------------------------

const manager = createPluginWorkerManager();
const results = {
  command: opts.command ?? `node bench/execute.mjs ${process.argv.slice(2).join(" ")}`,
  commit: opts.commit ?? commit(), machine: machine(), loadAverage: readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" "),
  startedAt: new Date().toISOString().replace(/\.\d+Z$/, "Z"), latency: [],
};
const sims = [];
try {
  for (const latencyMs of latencies) {
    const sim = await startSim(latencyMs);
    sims.push(sim);
    const handle = await startWorker(manager, sim.workerEnv);
    const l = await acquire(handle, sim.config);
    if (suites.has("issue12")) {
      const r = await issue12(handle, l, latencyMs, sim.log, false, latencyMs === 0 ? { manager, sim } : null);
      r.latencyVia = sim.latencyVia;
      r.tls = sim.tls;
      r.requestLog = sim.log?.source ?? "bench/simproxy.mjs (a second lease, no delay)";
      if (!sim.log) {
        // No request log in this sim: count on a lease that goes through a
        // proxy adding no delay; the timed commands above went straight.
        sim.counting = await startProxy({ target: new URL(sim.config.apiUrl).origin, latencyMs: sim.proxy ? 0 : latencyMs });
        const lc = await acquire(handle, { ...sim.config, apiUrl: sim.counting.rewrite(sim.config.apiUrl) });
        const c = await issue12(handle, lc, latencyMs, proxyLog(sim.counting), true);
        for (const k of ["echo", ...CASES.map(([key]) => key)]) for (const [p] of PATHS) r[k][p].requests = c[k][p].requests;
        await release(handle, lc);
      }
      results.latency.push(r);
      console.error(`execute bench: ${latencyMs} ms done`);
    }
    if (suites.has("issue5") && latencyMs === 0) {
      results.issue5 = {};
      await issue5(handle, l, sim, results.issue5);
    }
    await release(handle, l);
    await handle.stop();
    if (suites.has("issue5") && latencyMs === 0) results.issue5.peakRSSMiB = await peakRSS(manager, sim);
  }
} finally {
  await manager.stopAll();
  for (const s of sims) stopSim(s);
}
console.log(JSON.stringify(results, null, 2));
if (opts.json) writeFileSync(opts.json, JSON.stringify(results, null, 2));
if (results.latency.length > 0) {
  const md = markdown(results);
  console.log(md);
  if (opts.markdown) writeFileSync(opts.markdown, md);
}
process.exit(0);
