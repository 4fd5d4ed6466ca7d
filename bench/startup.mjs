// Start-up benchmark driver (scripts/bench.sh runs it; `make bench`).
//
// Starts the worker the way the Paperclip host does and measures, per run:
//   cold start   from fork/spawn to the initialize reply (the host writes
//                initialize right after spawning, without waiting for a
//                ready signal, and so does this driver)
//   peak RSS     VmHWM of the process running the Go binary, read from
//                /proc/<pid>/status after the health calls. With execve
//                the forked pid *is* the Go binary (exec starts a fresh
//                address space, so the high-water mark is the binary's
//                own); with the spawn fallback it is the launcher's child,
//                and the launcher's own VmHWM is reported separately.
//   calls/s      10,000 sequential health calls (send, await reply, next)
//   shutdown     from writing the shutdown request to the exit event
// and reports the median (and range) of N runs after one discarded warm-up.
//
//   node startup.mjs --launcher PATH --binary PATH [--runs 7] [--calls 10000]
//                    [--modes binary,launcher,launcher-spawn] [--json FILE]
//
// Modes:
//   binary          spawn(binary) with stdio pipes, no Node in between
//   launcher        fork(launcher) with stdio [pipe,pipe,pipe,ipc] as the
//                   host does; the launcher uses process.execve when this
//                   Node has it
//   launcher-spawn  the same fork with the launcher forced onto its spawn
//                   fallback (DAYTONA_WORKER_LAUNCH=spawn)
//   sdk             fork(--sdk PATH): a worker built with the official Node
//                   SDK (bench/sdk-worker.mjs), the reference; its peak RSS
//                   is the Node process's own

import { fork, spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { childrenOf } from "../interop/proc.mjs";

const { values: opts } = parseArgs({
  options: {
    launcher: { type: "string" },
    binary: { type: "string" },
    runs: { type: "string", default: "7" },
    calls: { type: "string", default: "10000" },
    modes: { type: "string", default: "binary,launcher,launcher-spawn" },
    sdk: { type: "string" },
    json: { type: "string" },
  },
});
if (!opts.launcher || !opts.binary) {
  console.error("startup.mjs: --launcher and --binary are required");
  process.exit(2);
}
const RUNS = Number(opts.runs);
const CALLS = Number(opts.calls);

// The environment the host gives a worker (docs/host.md#worker-environment), nothing else.
const hostEnv = {
  PATH: process.env.PATH ?? "",
  NODE_PATH: "",
  NODE_ENV: "production",
  TZ: "UTC",
  PAPERCLIP_PLUGIN_ID: "00000000-0000-4000-8000-0000000be4c4",
  PAPERCLIP_DEPLOYMENT_MODE: "local_trusted",
  PAPERCLIP_DEPLOYMENT_EXPOSURE: "private",
};

const initializeParams = {
  manifest: JSON.parse(readFileSync(new URL("../manifest.json", import.meta.url), "utf8")),
  config: {},
  instanceInfo: { instanceId: "bench", hostVersion: "2026.916.1" },
  apiVersion: 1,
  databaseNamespace: null,
};

const hwmKiB = (pid) => {
  const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no VmHWM for pid ${pid}`);
  return Number(m[1]);
};
const exeOf = (pid) => readFileSync(`/proc/${pid}/comm`, "utf8").trim();

function start(mode) {
  if (mode === "sdk") {
    if (!opts.sdk) throw new Error("mode sdk needs --sdk");
    return fork(opts.sdk, [], { stdio: ["pipe", "pipe", "pipe", "ipc"], execArgv: [], env: hostEnv, detached: false });
  }
  if (mode === "binary") {
    return spawn(opts.binary, [], { stdio: ["pipe", "pipe", "pipe"], env: hostEnv });
  }
  const env = mode === "launcher-spawn" ? { ...hostEnv, DAYTONA_WORKER_LAUNCH: "spawn" } : hostEnv;
  return fork(opts.launcher, [], { stdio: ["pipe", "pipe", "pipe", "ipc"], execArgv: [], env, detached: false });
}

async function oneRun(mode) {
  const t0 = performance.now();
  const child = start(mode);
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal, at: performance.now() })));
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d;
  });

  // NDJSON reader with id -> resolver, like the host's readline loop.
  const pending = new Map();
  let buf = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk) => {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const msg = JSON.parse(line);
      const p = pending.get(msg.id);
      if (p) {
        pending.delete(msg.id);
        p(msg);
      }
    }
  });
  let nextId = 1;
  const call = (method, params) =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      pending.set(id, (msg) => (msg.error ? reject(new Error(`${method}: ${msg.error.code} ${msg.error.message}`)) : resolve(msg.result)));
      child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
    });
  const failed = exited.then((e) => {
    throw new Error(`worker exited early (code=${e.code}, signal=${e.signal}): ${stderr.slice(-500)}`);
  });

  const init = await Promise.race([call("initialize", initializeParams), failed]);
  const coldMs = performance.now() - t0;
  if (!init?.ok) throw new Error(`initialize returned ${JSON.stringify(init)}`);

  const tCalls = performance.now();
  for (let i = 0; i < CALLS; i++) {
    const r = await Promise.race([call("health", {}), failed]);
    if (r?.status !== "ok") throw new Error(`health returned ${JSON.stringify(r)}`);
  }
  const callsPerSec = CALLS / ((performance.now() - tCalls) / 1000);

  // The process that runs the Go binary.
  let goPid = child.pid;
  let launcherKiB = null;
  if (mode === "launcher-spawn" || (mode === "launcher" && exeOf(child.pid) !== "daytona-worker")) {
    const kids = childrenOf(child.pid);
    if (kids.length !== 1) throw new Error(`launcher ${child.pid} has children ${kids.join(",")}`);
    goPid = kids[0];
    launcherKiB = hwmKiB(child.pid);
  }
  const comm = exeOf(goPid);
  if (mode !== "sdk" && comm !== "daytona-worker") throw new Error(`pid ${goPid} is ${comm}, want daytona-worker`);
  const peakKiB = hwmKiB(goPid);

  const tShutdown = performance.now();
  child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id: nextId++, method: "shutdown", params: {} })}\n`);
  const exit = await exited;
  if (exit.code !== 0 || exit.signal !== null) throw new Error(`shutdown exit code=${exit.code} signal=${exit.signal}`);
  return {
    coldMs,
    peakMiB: peakKiB / 1024,
    launcherMiB: launcherKiB === null ? null : launcherKiB / 1024,
    callsPerSec,
    shutdownMs: exit.at - tShutdown,
    execve: mode === "launcher" && goPid === child.pid,
  };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const summary = (runs, key) => {
  const xs = runs.map((r) => r[key]).filter((x) => x !== null);
  if (xs.length === 0) return null;
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
};

const results = {};
for (const mode of opts.modes.split(",")) {
  await oneRun(mode); // warm-up: page cache, CPU frequency; discarded
  const runs = [];
  for (let i = 0; i < RUNS; i++) runs.push(await oneRun(mode));
  results[mode] = {
    runs: RUNS,
    calls: CALLS,
    execve: runs.every((r) => r.execve),
    coldMs: summary(runs, "coldMs"),
    peakMiB: summary(runs, "peakMiB"),
    launcherMiB: summary(runs, "launcherMiB"),
    callsPerSec: summary(runs, "callsPerSec"),
    shutdownMs: summary(runs, "shutdownMs"),
  };
  const r = results[mode];
  console.error(
    `${mode}: cold ${r.coldMs.median.toFixed(1)} ms, peak ${r.peakMiB.median.toFixed(1)} MiB, ` +
      `${Math.round(r.callsPerSec.median)} calls/s, shutdown ${r.shutdownMs.median.toFixed(1)} ms`,
  );
}
const out = { node: process.version, results };
if (opts.json) writeFileSync(opts.json, JSON.stringify(out, null, 2));
else console.log(JSON.stringify(out, null, 2));
