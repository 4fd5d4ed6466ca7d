// Duplex channel benchmark through the real host path: the packaged worker
// behind its launcher, started by the worker manager of @paperclipai/server
// 2026.916.1, channels opened with its openDuplexChannel, against
// cmd/daytona-sim on loopback. In the same run, the baseline: the emulator's
// own terminal WebSocket driven directly from Node (no worker, no host).
//
//   node bench/duplex.mjs --launcher PATH --manifest PATH --sim PATH [--runs 5]
//        [--echo-runs 200] [--mib 64] [--channels 20] [--channel-mib 16]
//
//   echo RTT     a 1 KiB write to `cat` until its 1 KiB came back: median and
//                p90 of --echo-runs, through the host, and on the raw socket
//   throughput   --mib MiB through `cat` (pieces of 128 KiB, at most 256 KiB
//                written but not yet echoed, inside the host's 384 KiB of
//                unanswered writes): MiB/s, median of --runs, through the host
//                and on the raw socket
//   peak RSS     VmHWM of the worker after --channels channels each pushed
//                --channel-mib MiB through `cat` at once, next to its VmRSS
//                before
// Prints one markdown section for bench/BENCHMARKS.md.

import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { byteCounter, openCollecting, until, writeEchoed } from "../interop/channels.mjs";

process.env.NODE_ENV = "production";
process.env.PAPERCLIP_LOG_LEVEL ??= "warn";
const here = path.dirname(fileURLToPath(import.meta.url));
const serverDist = path.join(here, "..", "interop", "node_modules", "@paperclipai", "server", "dist");
const { createPluginWorkerManager } = await import(pathToFileURL(path.join(serverDist, "services/plugin-worker-manager.js")).href);

const { values: opts } = parseArgs({
  options: {
    launcher: { type: "string" }, manifest: { type: "string" }, sim: { type: "string" },
    runs: { type: "string", default: "5" }, "echo-runs": { type: "string", default: "200" },
    mib: { type: "string", default: "64" }, channels: { type: "string", default: "20" },
    "channel-mib": { type: "string", default: "16" },
  },
});
const RUNS = Number(opts.runs);
const ECHO_RUNS = Number(opts["echo-runs"]);
const MIB = Number(opts.mib);
const CHANNELS = Number(opts.channels);
const CHANNEL_MIB = Number(opts["channel-mib"]);
const manifest = (await import(pathToFileURL(path.resolve(opts.manifest)).href)).default;
const MiB = 1048576;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const status = (pid, key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]) / 1024;

// ---- the sim ----------------------------------------------------------------
const sim = spawn(opts.sim, ["-stop-on-eof"], { stdio: ["pipe", "pipe", "inherit"] });
const ready = JSON.parse(await new Promise((resolve, reject) => {
  let out = "";
  sim.stdout.setEncoding("utf8");
  sim.stdout.on("data", (d) => {
    out += d;
    if (out.includes("\n")) resolve(out.slice(0, out.indexOf("\n")));
  });
  sim.once("exit", () => reject(new Error("daytona-sim exited")));
}));
const config = { apiUrl: ready.apiUrl, apiKey: ready.apiKey, timeoutMs: 600000 };
const auth = { authorization: `Bearer ${ready.apiKey}` };

// ---- the worker through the host manager --------------------------------------
const manager = createPluginWorkerManager();
const pluginId = "00000000-0000-4000-8000-00000000d0e1";
const handle = await manager.startWorker(pluginId, {
  entrypointPath: opts.launcher, manifest, config: {},
  instanceInfo: { instanceId: "bench", hostVersion: "2026.916.1" }, apiVersion: 1, databaseNamespace: null,
  hostHandlers: {}, autoRestart: false, env: {},
});
const pid = handle.diagnostics().pid; // the Go binary itself (execve)
const ids = { companyId: "bench-company", environmentId: "bench-env" };
const lease = await handle.call("environmentAcquireLease", { driverKey: "daytona", ...ids, issueId: null, config,
  runId: "bench-run", agentId: "bench-agent", executionWorkspaceId: "bench-ws", adapterType: "claude_local" }, 630000);
const ctx = { ids, state: { lease } };
const sandboxId = lease.providerLeaseId;

async function echoRTT(ch) {
  const block = randomBytes(1024);
  const times = [];
  for (let i = 0; i < ECHO_RUNS; i++) {
    const t0 = performance.now();
    await writeEchoed(ch, block);
    times.push(performance.now() - t0);
  }
  return times;
}

async function throughput(ch) {
  const payload = randomBytes(MIB * MiB);
  const t0 = performance.now();
  await writeEchoed(ch, payload, { timeoutMs: 600_000 });
  return MIB / ((performance.now() - t0) / 1000);
}

const cpuTicks = (p) => {
  const f = readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) / 100; // utime + stime, seconds (USER_HZ 100)
};
const host = { rtt: [], mibs: [], cpu: {} };
{
  const ch = await openCollecting(handle, ctx, ["cat"], { keep: false });
  await writeEchoed(ch, randomBytes(MiB)); // warm-up
  host.rtt = await echoRTT(ch);
  const w0 = cpuTicks(pid);
  const n0 = process.cpuUsage();
  for (let r = 0; r < RUNS; r++) host.mibs.push(await throughput(ch));
  const n1 = process.cpuUsage(n0);
  host.cpu = { worker: cpuTicks(pid) - w0, host: (n1.user + n1.system) / 1e6, sim: cpuTicks(sim.pid) };
  await ch.session.close();
}

// ---- the raw terminal socket of the emulator (baseline) ----------------------
async function rawTerminal() {
  const tb = `${ready.toolboxProxyUrl}/${sandboxId}`;
  const id = `bench-${randomUUID()}`;
  const res = await fetch(`${tb}/process/pty`, { method: "POST", headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ id, cols: 120, rows: 30, lazyStart: true }) });
  if (res.status !== 201) throw new Error(`create PTY: ${res.status}`);
  const ws = new WebSocket(`${tb.replace(/^http/, "ws")}/process/pty/${id}/connect`, { headers: auth });
  ws.binaryType = "arraybuffer";
  let head = Buffer.alloc(0); // output up to the marker
  const count = byteCounter();
  let connected = false;
  ws.onmessage = (ev) => {
    if (typeof ev.data === "string") {
      if (ev.data.includes('"connected"')) connected = true;
      return;
    }
    if (head.length < 4096) head = Buffer.concat([head, Buffer.from(ev.data)]);
    count.add(ev.data.byteLength);
  };
  await until("the raw socket", () => connected);
  // The same raw terminal the worker sets up, with a marker after stty.
  ws.send(Buffer.from("stty raw -echo; printf '\\102\\105\\116\\103\\110'; exec cat\r"));
  await until("the raw marker", () => head.includes("BENCH"));
  const ch = {
    ...count,
    session: { write: (b) => { for (let o = 0; o < b.length; o += 61440) ws.send(b.subarray(o, Math.min(o + 61440, b.length))); } },
  };
  return { ch, close: async () => { ws.close(); await fetch(`${tb}/process/pty/${id}`, { method: "DELETE", headers: auth }); } };
}
const raw = { rtt: [], mibs: [] };
{
  const { ch, close } = await rawTerminal();
  await writeEchoed(ch, randomBytes(MiB));
  raw.rtt = await echoRTT(ch);
  for (let r = 0; r < RUNS; r++) raw.mibs.push(await throughput(ch));
  await close();
}

// ---- 20 channels at once ---------------------------------------------------------
const rssBefore = status(pid, "VmRSS");
const hwmBefore = status(pid, "VmHWM");
let manyMs;
{
  const chans = await Promise.all(Array.from({ length: CHANNELS }, () => openCollecting(handle, ctx, ["cat"], { keep: false })));
  const t0 = performance.now();
  await Promise.all(chans.map((ch) => writeEchoed(ch, randomBytes(CHANNEL_MIB * MiB), { timeoutMs: 600_000 })));
  manyMs = performance.now() - t0;
  await Promise.all(chans.map((ch) => ch.session.close()));
}
const hwm = status(pid, "VmHWM");

await handle.call("environmentDestroyLease", { driverKey: "daytona", ...ids, issueId: null, config: { ...config, ...lease.metadata },
  providerLeaseId: sandboxId, leaseMetadata: lease.metadata }, 630000);
await manager.stopWorker(pluginId);
sim.stdin.end();

const f = (x, d = 1) => x.toFixed(d);
const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
console.log(`| | 1 KiB echo RTT median / p90 | ${MIB} MiB through cat, MiB/s (median of ${RUNS}) |
| --- | --- | --- |
| duplex channel through the host manager | ${f(median(host.rtt), 2)} / ${f(pct(host.rtt, 0.9), 2)} ms | ${f(median(host.mibs))} (${host.mibs.map((x) => f(x)).join(", ")}) |
| raw emulator PTY WebSocket, same run | ${f(median(raw.rtt), 2)} / ${f(pct(raw.rtt, 0.9), 2)} ms | ${f(median(raw.mibs))} (${raw.mibs.map((x) => f(x)).join(", ")}) |
| ratio duplex / raw | ${f(median(host.rtt) / median(raw.rtt), 2)} | ${f(median(host.mibs) / median(raw.mibs), 2)} |

CPU for the ${RUNS} × ${MIB} MiB through the host: worker ${f(host.cpu.worker, 2)} s, host (this Node process, manager and driver) ${f(host.cpu.host, 2)} s.

${CHANNELS} channels streaming ${CHANNEL_MIB} MiB each through cat at once (${f((CHANNELS * CHANNEL_MIB) / (manyMs / 1000))} MiB/s in total):
worker peak RSS (VmHWM) ${f(hwm)} MiB; before them VmRSS ${f(rssBefore)} MiB, VmHWM ${f(hwmBefore)} MiB (after the single-channel runs).
Load average ${load} at the end; ${ECHO_RUNS} echo round trips per row.`);
process.exit(0);
