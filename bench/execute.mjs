// Execute benchmark through the real host path: the packaged worker behind
// its launcher, started by the real worker manager of @paperclipai/server
// 2026.916.1, against cmd/daytona-sim on loopback.
//
//   node bench/execute.mjs --launcher PATH --manifest PATH --sim PATH [--runs 7]
//        [--latency 0,40ms] [--echo-runs 11] [--suite issue5,issue12] [--proxy]
//        [--json FILE] [--markdown FILE] [--command TEXT] [--commit REV]
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
// Issue #12 measures, at every --latency (one sim per latency, each request,
// toolbox request and WebSocket upgrade held that long), for the session path
// and the one-shot path (bypassSession, the baseline) in the same run, the
// two paths alternating command by command:
//   echo hi     median of --echo-runs `echo hi` in ms, and in round trips
//               (ms / latency)
//   1 / 8 MiB   `cat` of a 1 MiB and an 8 MiB file: MiB/s and ms (medians of
//               --runs), session / one-shot ratio
//   requests    API calls and new connections per command by operation
//               (dispatch, follow, status, snapshot, execute...), from the
//               sim's request log read before and after each command
//   floors      at 0 ms, next to the 8 MiB one-shot path and alternating
//               with it: what the same command costs without the worker.
//               host: the real worker manager calling a stand-in worker
//               (bench/floor-worker.mjs) that answers with the one-shot
//               path's own 8 MiB result, so only the host's side of the
//               pipe is timed (its readline, JSON.parse, settling the call);
//               emulator: the same command line the worker sends, POSTed
//               to the sim's /process/execute from this process, the answer
//               read to its last byte. The result line cannot be complete
//               before the answer is, so the two are serial: their sum
//               bounds the one-shot rate on this machine, and one-shot ms
//               minus the floors is the worker's share (per round, then
//               the median). The emulator floor includes Node's HTTP
//               client reading the answer where the worker's Go client
//               reads it while it arrives, so a share near 0 or below it
//               means nothing is left to take.
// --markdown writes the issue #12 table, the per-operation counts and the
// issue's bars (with whether each holds) for bench/BENCHMARKS.md.
//
// Latency and the request log come from the sim (-latency, GET
// <apiUrl>/__sim/requests) when it has them; otherwise (an older sim, or
// --proxy) from bench/simproxy.mjs in front of it. At 0 ms without a request
// log, a second lease through a proxy that adds no delay counts the requests
// while the timed commands go straight to the sim.

import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
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
    latency: { type: "string", default: "0" }, "echo-runs": { type: "string", default: "11" },
    suite: { type: "string", default: "issue5,issue12" }, proxy: { type: "boolean", default: false },
    markdown: { type: "string" }, command: { type: "string" }, commit: { type: "string" },
  },
});
const RUNS = Number(opts.runs);
const ECHO_RUNS = Number(opts["echo-runs"]);
const suites = new Set(opts.suite.split(","));
if (!(RUNS >= 1) || !(ECHO_RUNS >= 1)) throw new Error("--runs and --echo-runs must be at least 1");
// "40ms", "0.04s", "40" (ms), "0".
const parseMs = (s) => {
  const m = /^(\d+(?:\.\d+)?)(ms|s)?$/.exec(s.trim());
  if (!m) throw new Error(`bad --latency ${JSON.stringify(s)} (want e.g. 0,40ms)`);
  return Number(m[1]) * (m[2] === "s" ? 1000 : 1);
};
const latencies = opts.latency.split(",").map(parseMs);
const manifest = (await import(pathToFileURL(path.resolve(opts.manifest)).href)).default;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const nowNs = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
const MiB = 1048576;

// Whether this sim build has the -latency flag (older builds do not).
const simHelp = spawnSync(opts.sim, ["-help"], { encoding: "utf8" });
const simHasLatency = /-latency\b/.test(simHelp.stdout ?? "");
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
  if (latencyMs > 0 && simHasLatency && !opts.proxy) args.push("-latency", `${latencyMs}ms`);
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
  sim.log = await simLog(sim);
  sim.latencyVia = latencyMs === 0 ? "none" : "daytona-sim -latency";
  if (latencyMs > 0 && !args.includes("-latency")) {
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

// The sim's request log, or null when this build has none. ?since=N skips
// the first N entries ever logged; the log's own reads are not logged.
async function simLog(sim) {
  const url = `${sim.config.apiUrl}/__sim/requests`;
  const get = async (since) => {
    const resp = await fetch(`${url}?since=${since}`, { headers: { authorization: `Bearer ${sim.config.apiKey}` } });
    if (!resp.ok) throw new Error(`${url}: ${resp.status}`);
    const body = await resp.json();
    if (!Array.isArray(body)) throw new Error(`${url}: not a JSON array`);
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
  };
}

function proxyLog(proxy) {
  return { source: "bench/simproxy.mjs", mark: async () => proxy.requests().length, since: async (n) => proxy.requests(n) };
}

function stopSim(sim) {
  sim.proxy?.close();
  sim.counting?.close();
  sim.child.stdin.end();
}

let seq = 0;
async function startWorker(manager) {
  const handle = await manager.startWorker(`00000000-0000-4000-8000-${String(++seq).padStart(12, "0")}`, {
    entrypointPath: opts.launcher, manifest, config: {},
    instanceInfo: { instanceId: "bench", hostVersion: "2026.916.1" }, apiVersion: 1, databaseNamespace: null,
    hostHandlers: {}, autoRestart: false, env: {},
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
// a wrong result; log (may be null) counts the requests of each command.
// extras ([name, fn] pairs, e.g. the floors) run after the paths in every
// round: fn gets this round's one-shot result and returns its ms.
async function scenario(handle, l, log, script, runs, check, extras = []) {
  const out = {};
  for (const [name] of PATHS) out[name] = { ms: [], tallies: [] };
  for (const [name] of extras) out[name] = { ms: [] };
  for (let i = 0; i <= runs; i++) {
    let oneShot;
    for (const [name, bypassSession] of i % 2 === 0 ? PATHS : [...PATHS].reverse()) {
      const mark = log ? await log.mark() : 0;
      let live = 0;
      const t0 = performance.now();
      const r = await execute(handle, l, script, { bypassSession, onLog: (stream, chunk) => { live += chunk.length; } });
      const ms = performance.now() - t0;
      check(r);
      if (bypassSession) oneShot = r;
      if (i === 0) continue;
      out[name].ms.push(ms);
      out[name].bytes = r.stdout.length;
      out[name].liveShare = live / Math.max(1, r.stdout.length);
      if (log) out[name].tallies.push(tally(await log.since(mark)));
    }
    for (const [name, fn] of extras) {
      const ms = await fn(oneShot);
      if (i > 0) out[name].ms.push(ms);
    }
  }
  return out;
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
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const url = new URL(`${sim.toolboxProxyUrl}/${l.lease.providerLeaseId}/process/execute`);
  const body = JSON.stringify({ command: workerCommandLine(l.lease.metadata.remoteCwd, script), timeout: 600 });
  const emulator = () => new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request(url, { method: "POST", agent, headers: { authorization: `Bearer ${sim.config.apiKey}`,
      "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (resp) => {
      let n = 0;
      let tail = "";
      resp.on("data", (d) => { n += d.length; tail = d.subarray(-2).toString(); });
      resp.on("end", () => {
        const ms = performance.now() - t0;
        if (resp.statusCode !== 200 || n < 8 * MiB || tail !== '"}') reject(new Error(`emulator floor: ${resp.statusCode}, ${n} bytes`));
        else resolve(ms);
      });
      resp.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
  return {
    ways: [["hostFloor", host], ["emulatorFloor", emulator]],
    close: async () => {
      agent.destroy();
      await fake?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

// withFloors ({manager, sim}, at 0 ms only) adds the floors to the 8 MiB
// scenario.
async function issue12(handle, l, latencyMs, log, countOnly = false, withFloors = null) {
  const dir = l.lease.metadata.remoteCwd;
  const f1 = `${dir}/bench-1mib.txt`;
  const f8 = `${dir}/bench-8mib.txt`;
  await execute(handle, l, `head -c ${MiB} /dev/zero | tr '\\0' 'a' | fold -w 1023 | head -c ${MiB} > '${f1}' && ` +
    `head -c ${8 * MiB} /dev/zero | tr '\\0' 'b' | fold -w 1023 | head -c ${8 * MiB} > '${f8}'`);
  const runs = countOnly ? 2 : RUNS;
  const res = { latencyMs };
  const echo = await scenario(handle, l, log, "echo hi", countOnly ? 5 : ECHO_RUNS, (r) => {
    if (r.stdout !== "hi\n" || r.exitCode !== 0) throw new Error(`echo hi: ${JSON.stringify(r).slice(0, 300)}`);
  });
  const big = (size, ch) => (r) => {
    if (r.stdout.length !== size || r.stdout[0] !== ch || r.exitCode !== 0) throw new Error(`cat ${size}: got ${r.stdout.length} chars`);
  };
  const m1 = await scenario(handle, l, log, `cat '${f1}'`, runs, big(MiB, "a"));
  const fl = withFloors ? floors(withFloors.manager, withFloors.sim, l, `cat '${f8}'`, big(8 * MiB, "b")) : null;
  let m8;
  try {
    m8 = await scenario(handle, l, log, `cat '${f8}'`, runs, big(8 * MiB, "b"), fl?.ways ?? []);
  } finally {
    await fl?.close();
  }
  for (const [key, sc, bytes] of [["echo", echo, 0], ["mib1", m1, MiB], ["mib8", m8, 8 * MiB]]) {
    res[key] = {};
    for (const [name] of PATHS) {
      const ms = median(sc[name].ms);
      res[key][name] = { medianMs: ms, runs: sc[name].ms.length, samplesMs: sc[name].ms.map((t) => Math.round(t * 10) / 10),
        requests: summarize(sc[name].tallies) };
      if (latencyMs > 0) res[key][name].roundTrips = ms / latencyMs;
      if (bytes) {
        res[key][name].MiBs = bytes / MiB / (ms / 1000); // the rate of the median command
        res[key][name].liveShare = sc[name].liveShare;
      }
    }
    if (bytes) res[key].ratioSessionToOneShot = res[key].session.MiBs / res[key].oneShot.MiBs;
  }
  if (fl) {
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
    const resp = await fetch(tbUrl, { method: "POST", headers: { authorization: `Bearer ${sim.config.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ command: oneMiB, timeout: 600 }) });
    const body = await resp.json();
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
    const h = await startWorker(manager);
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

function markdown(results) {
  const rs = results.latency;
  const L = [];
  L.push(`Reproduce: \`${results.command}\``, "");
  L.push(`Commit ${results.commit}; ${results.machine}; load average ${results.loadAverage} when the runs started` +
    ` (${results.startedAt}). Latency via ${[...new Set(rs.filter((r) => r.latencyMs > 0).map((r) => r.latencyVia))].join(", ") || "–"};` +
    ` requests counted by ${[...new Set(rs.map((r) => r.requestLog))].join(", ")}. Medians; \`echo hi\` of ${ECHO_RUNS}` +
    ` commands, 1 MiB and 8 MiB of ${RUNS}, per path, after one warm-up each, the two paths alternating.`, "");
  const head = ["| measure |"];
  const sep = ["| --- |"];
  for (const r of rs) {
    head.push(` ${lat(r)}, session | ${lat(r)}, one-shot |`);
    sep.push(" --- | --- |");
  }
  L.push(head.join(""), sep.join(""));
  const row = (label, cell) => L.push(`| ${label} |${rs.map((r) => PATHS.map(([p]) => ` ${cell(r, p)} |`).join("")).join("")}`);
  row("`echo hi` (round trips: ms / latency)", (r, p) => `${f1(r.echo[p].medianMs)} ms${r.latencyMs > 0 ? ` (${f2(r.echo[p].roundTrips)})` : ""}`);
  // What the latency itself costs, without the machine's own time per
  // command: (ms at this latency − ms at 0 ms) / latency.
  const r0 = rs.find((r) => r.latencyMs === 0);
  if (r0 && rs.some((r) => r.latencyMs > 0)) {
    row("`echo hi`: round trips added by the latency", (r, p) => (r.latencyMs > 0 ? f2((r.echo[p].medianMs - r0.echo[p].medianMs) / r.latencyMs) : ""));
  }
  for (const [k, label] of [["mib1", "1 MiB of stdout"], ["mib8", "8 MiB of stdout"]]) {
    row(label, (r, p) => `${f1(r[k][p].MiBs)} MiB/s (${f0(r[k][p].medianMs)} ms)`);
    row(`${label}: session / one-shot`, (r, p) => (p === "session" ? `${f2(r[k].ratioSessionToOneShot)}×` : ""));
  }
  // The floors sit in the 0 ms one-shot column: the same command without
  // the worker, measured in the same rounds.
  const fcell = (fn) => (r, p) => (p === "oneShot" && r.mib8.floors ? fn(r.mib8.floors) : "");
  if (rs.some((r) => r.mib8.floors)) {
    row("8 MiB floor: host alone (real worker manager, stand-in worker, the same result line)", fcell((f) => `${f1(f.hostFloor.medianMs)} ms`));
    row("8 MiB floor: emulator alone (`/process/execute` of the same command line, read to the end)", fcell((f) => `${f1(f.emulatorFloor.medianMs)} ms`));
    row("8 MiB floor: host + emulator → best rate without the worker", fcell((f) => `${f1(f.sumMs)} ms → ${f1(f.boundMiBs)} MiB/s`));
    row("8 MiB: the worker's share (one-shot − floors of the same round, median)", fcell((f) => `${signed(f.workerShareMs, f1)} ms (${signed(100 * f.workerShareOfOneShot, f0)} %)`));
  }
  // Live chunks of a command that has finished only repeat its result.
  row("1 MiB: share of stdout also sent as live `execute.log`", (r, p) => f2(r.mib1[p].liveShare));
  row("API calls / new connections per `echo hi`", (r, p) => {
    const s = r.echo[p].requests;
    return s ? `${f1(s.callsMean)} / ${f1(s.newConnsMean)}` : "–";
  });
  L.push("", "API calls per command by operation (mean over the measured commands) and new connections (of them for", "WebSocket upgrades, which cannot reuse a pooled connection):", "");
  L.push("| latency | path | command | calls per command | new connections (WebSocket) | by operation |", "| --- | --- | --- | --- | --- | --- |");
  for (const r of rs) {
    for (const [k, label] of [["echo", "`echo hi`"], ["mib1", "1 MiB"], ["mib8", "8 MiB"]]) {
      for (const [p] of PATHS) {
        const s = r[k][p].requests;
        if (!s) continue;
        L.push(`| ${lat(r)} | ${p === "session" ? "session" : "one-shot"} | ${label} | ${f1(s.callsMean)} (median ${s.callsMedian}) | ${f1(s.newConnsMean)} (${f1(s.newConnsWSMean)}) | ${opsText(s)} |`);
      }
    }
  }
  L.push("", "The issue's bars:", "", "| bar | measured | |", "| --- | --- | --- |");
  const at0 = rs.find((r) => r.latencyMs === 0);
  for (const r of rs.filter((x) => x.latencyMs > 0)) {
    const rt = r.latencyMs;
    const e = r.echo.session;
    L.push(`| \`echo hi\` at ${rt} ms: session median ≤ 2.2 round trips (≤ ${f0(2.2 * rt)} ms) | ${f1(e.medianMs)} ms = ${f2(e.roundTrips)} round trips | ${holds(e.roundTrips <= 2.2)} |`);
    for (const [k, label] of [["mib1", "1 MiB"], ["mib8", "8 MiB"]]) {
      const d = r[k].session.medianMs - r[k].oneShot.medianMs;
      L.push(`| ${label} at ${rt} ms: session at most one round trip (+10 %) longer than one-shot (≤ ${f0(1.1 * rt)} ms) | ${signed(d, f0)} ms = ${signed(d / rt, f2)} round trips | ${holds(d <= 1.1 * rt)} |`);
      if (at0) {
        const o = r[k].oneShot.medianMs - at0[k].oneShot.medianMs;
        L.push(`| ${label} one-shot at ${rt} ms costs one round trip (+10 %) more than at 0 ms | ${signed(o, f0)} ms = ${signed(o / rt, f2)} round trips | ${holds(o <= 1.1 * rt)} |`);
      }
    }
  }
  if (at0) {
    for (const [k, label] of [["mib1", "1 MiB"], ["mib8", "8 MiB"]]) {
      const x = at0[k].ratioSessionToOneShot;
      L.push(`| ${label} at 0 ms: session ≥ 0.9× one-shot | ${f2(x)}× | ${holds(x >= 0.9)} |`);
    }
    const fl = at0.mib8.floors;
    if (fl) {
      // What the bar's 133 ms per 8 MiB has to hold: the floors, which are
      // not the worker's, and the worker's share. The share counts as small
      // at up to a fifth of the one-shot time.
      const budget = 8 / 60 * 1000;
      const met = at0.mib8.oneShot.MiBs >= 60;
      const small = fl.workerShareOfOneShot <= 0.2;
      const why = [];
      if (!met && fl.sumMs > budget) why.push(`the floors alone exceed the ${f0(budget)} ms on this machine`);
      if (!met && fl.workerShareMs >= budget) why.push(`the worker's share alone (${f0(fl.workerShareMs)} ms) exceeds the ${f0(budget)} ms`);
      else if (!met && fl.workerShareMs > 0) why.push(`with the worker's share as measured, host + emulator would have to take ≤ ${f0(budget - fl.workerShareMs)} ms`);
      L.push(`| 8 MiB one-shot at 0 ms ≥ 60 MiB/s (≤ ${f0(budget)} ms) | ${f1(at0.mib8.oneShot.MiBs)} MiB/s (${f0(at0.mib8.oneShot.medianMs)} ms)` +
        ` = floors ${f0(fl.sumMs)} ms (host ${f0(fl.hostFloor.medianMs)} + emulator ${f0(fl.emulatorFloor.medianMs)}, at most ${f1(fl.boundMiBs)} MiB/s here)` +
        ` + the worker's share ${signed(fl.workerShareMs, f0)} ms (${signed(100 * fl.workerShareOfOneShot, f0)} % of the one-shot time: ${small ? "small" : "not small"}, ≤ 20 % counts as small)` +
        ` | ${holds(met)}${why.length ? `: ${why.join("; ")}` : ""} |`);
    } else {
      L.push(`| 8 MiB one-shot at 0 ms ≥ 60 MiB/s | ${f1(at0.mib8.oneShot.MiBs)} MiB/s | ${holds(at0.mib8.oneShot.MiBs >= 60)} |`);
    }
    L.push(`| \`echo hi\` at 0 ms no slower than before | ${f1(at0.echo.session.medianMs)} ms (session), ${f1(at0.echo.oneShot.medianMs)} ms (one-shot) | compare with the before column |`);
  }
  for (const r of rs) {
    const s = r.echo.session.requests;
    if (!s) continue;
    L.push(`| API calls per short command ≤ 2 on the common path (session, ${lat(r)}) | median ${s.callsMedian}, mean ${f1(s.callsMean)}: ${opsText(s)} | ${holds(s.callsMedian <= 2)} |`);
    const o = r.echo.oneShot.requests;
    L.push(`| new connections per \`echo hi\` after warm-up: 0 (session / one-shot, ${lat(r)}) | ${f2(s.newConnsMean)} (${f2(s.newConnsWSMean)} for WebSocket) / ${f2(o?.newConnsMean)} | ${holds(s.newConnsMean === 0 && o?.newConnsMean === 0)} |`);
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
    const handle = await startWorker(manager);
    const l = await acquire(handle, sim.config);
    if (suites.has("issue12")) {
      const r = await issue12(handle, l, latencyMs, sim.log, false, latencyMs === 0 ? { manager, sim } : null);
      r.latencyVia = sim.latencyVia;
      r.requestLog = sim.log?.source ?? "bench/simproxy.mjs (a second lease, no delay)";
      if (!sim.log) {
        // No request log in this sim: count on a lease that goes through a
        // proxy adding no delay; the timed commands above went straight.
        sim.counting = await startProxy({ target: new URL(sim.config.apiUrl).origin, latencyMs: sim.proxy ? 0 : latencyMs });
        const lc = await acquire(handle, { ...sim.config, apiUrl: sim.counting.rewrite(sim.config.apiUrl) });
        const c = await issue12(handle, lc, latencyMs, proxyLog(sim.counting), true);
        for (const k of ["echo", "mib1", "mib8"]) for (const [p] of PATHS) r[k][p].requests = c[k][p].requests;
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
