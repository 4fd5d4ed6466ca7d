// Execute benchmark through the real host path (issue #5): the packaged
// worker behind its launcher, started by the real worker manager of
// @paperclipai/server 2026.916.1, against cmd/daytona-sim on loopback.
//
//   node bench/execute.mjs --launcher PATH --manifest PATH --sim PATH [--runs 7] [--json FILE]
//
// Measures (medians of --runs after one warm-up):
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

import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

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
  },
});
const RUNS = Number(opts.runs);
const manifest = (await import(pathToFileURL(path.resolve(opts.manifest)).href)).default;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const nowNs = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));

async function startSim() {
  const child = spawn(opts.sim, ["-stop-on-eof"], { stdio: ["pipe", "pipe", "inherit"] });
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
  return { child, toolboxProxyUrl: ready.toolboxProxyUrl, config: { apiUrl: ready.apiUrl, apiKey: ready.apiKey, timeoutMs: 600000 } };
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

const sim = await startSim();
const manager = createPluginWorkerManager();
const results = {};
try {
  const handle = await startWorker(manager);
  const l = await acquire(handle, sim.config);

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
  const base = [];
  for (let i = 0; i <= RUNS; i++) {
    const t0 = performance.now();
    const resp = await fetch(tbUrl, { method: "POST", headers: { authorization: `Bearer ${sim.config.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ command: oneMiB, timeout: 600 }) });
    const body = await resp.json();
    const dt = (performance.now() - t0) / 1000;
    if (body.result.length < 1048576) throw new Error("short baseline");
    if (i > 0) base.push(body.result.length / 1048576 / dt);
  }
  results.baselineToolboxOneShotMiBs = median(base);
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
  await release(handle, l);
  await handle.stop();

  // Peak RSS of a fresh worker per output size.
  results.peakRSSMiB = {};
  for (const mib of opts["rss-sizes"].split(",").map(Number)) {
    const h = await startWorker(manager);
    const pid = h.diagnostics().pid;
    const base0 = vmHWM(pid);
    const lw = await acquire(h, sim.config);
    const r = await execute(h, lw, `head -c ${mib * 1048576} /dev/zero | tr '\\0' 'a' | fold -w 4095`);
    results.peakRSSMiB[`${mib}MiB`] = { beforeMiB: base0, peakMiB: vmHWM(pid), truncated: r.metadata?.outputTruncated === true,
      resultStdoutMiB: r.stdout.length / 1048576 };
    await release(h, lw);
    await h.stop();
  }
} finally {
  await manager.stopAll();
  sim.child.stdin.end();
}
console.log(JSON.stringify(results, null, 2));
if (opts.json) writeFileSync(opts.json, JSON.stringify(results, null, 2));
process.exit(0);
