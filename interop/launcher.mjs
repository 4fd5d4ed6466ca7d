// Launcher behaviour (npm/worker.mjs, docs/host.md#launcher), checked on the
// installed package by forking the launcher exactly as the host does
// (stdio pipe/pipe/pipe + IPC, scrubbed env):
//   exec bit restored, missing-platform error, IPC channel not forwarded,
//   exit code and signal death mirrored, SIGTERM/SIGINT/SIGHUP relayed,
//   no worker left behind after a SIGKILL of the launcher.
// Each check runs with the launcher's default path (execve where this Node
// has it) and with its spawn fallback forced, so Node 24 covers both.
//
//   node launcher.mjs --package-dir DIR --result-file FILE
//
// Prints one line per check, writes {"passed":n,"failed":n} to FILE.

import { fork, spawn } from "node:child_process";
import { chmodSync, cpSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

import { childrenOf } from "./proc.mjs";

const { values: args } = parseArgs({
  options: { "package-dir": { type: "string" }, "result-file": { type: "string" } },
});
if (!args["package-dir"]) {
  console.error("launcher.mjs: --package-dir is required");
  process.exit(2);
}

const label = `node ${process.version}`;
let passed = 0;
let failed = 0;
function check(name, problem, detail) {
  if (problem) {
    failed++;
    console.log(`FAIL [${label}] launcher: ${name}: ${problem}`);
  } else {
    passed++;
    console.log(`PASS [${label}] launcher: ${name}${detail ? ` (${detail})` : ""}`);
  }
}

const target = `${process.platform}-${process.arch}`;
const scratch = mkdtempSync(path.join(tmpdir(), "daytona-launcher-"));
let copies = 0;
/** A private copy of the installed package, to break on purpose. */
function copyPackage() {
  const dir = path.join(scratch, `pkg${copies++}`);
  cpSync(args["package-dir"], dir, { recursive: true });
  return dir;
}
const binaryIn = (dir) => path.join(dir, "bin", target, "daytona-worker");

const hostEnv = (extra = {}) => ({
  PATH: process.env.PATH ?? "",
  NODE_PATH: "",
  NODE_ENV: "production",
  TZ: "UTC",
  PAPERCLIP_PLUGIN_ID: "00000000-0000-4000-8000-0000000000aa",
  PAPERCLIP_DEPLOYMENT_MODE: "local_trusted",
  PAPERCLIP_DEPLOYMENT_EXPOSURE: "private",
  ...extra,
});
const MODES = typeof process.execve === "function" ? ["execve", "spawn"] : ["spawn"];
const modeEnv = (mode) => (mode === "spawn" ? { DAYTONA_WORKER_LAUNCH: "spawn" } : {});

/**
 * Starts a process (the launcher through fork, or the binary alone) and
 * collects its output; `frame()` resolves with the first stdout line.
 */
function start(kind, file, env) {
  const child =
    kind === "fork"
      ? fork(file, [], { stdio: ["pipe", "pipe", "pipe", "ipc"], execArgv: [], env, detached: false })
      : spawn(file, [], { stdio: ["pipe", "pipe", "pipe"], env });
  const out = { stdout: "", stderr: "" };
  const lineWaiters = [];
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (d) => {
    out.stdout += d;
    if (out.stdout.includes("\n")) while (lineWaiters.length) lineWaiters.shift()();
  });
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d) => {
    out.stderr += d;
  });
  child.stdin.on("error", () => {});
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  const frame = () =>
    Promise.race([
      new Promise((resolve) => (out.stdout.includes("\n") ? resolve() : lineWaiters.push(resolve))).then(() => JSON.parse(out.stdout.split("\n")[0])),
      exited.then((e) => {
        throw new Error(`exited before replying (code=${e.code}, signal=${e.signal}): ${out.stderr.slice(-300)}`);
      }),
    ]);
  const initialize = () => {
    child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { manifest: {}, config: {}, instanceInfo: { instanceId: "i", hostVersion: "2026.916.1" }, apiVersion: 1, databaseNamespace: null } })}\n`);
    return frame();
  };
  return { child, out, exited, initialize };
}

/** Resolves true once pid is gone, false if it is still there at the deadline. */
async function gone(pid, deadlineMs) {
  const end = Date.now() + deadlineMs;
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch (err) {
      if (err.code === "ESRCH") return true;
    }
    // A zombie (exited, not yet reaped) counts as gone.
    try {
      if (/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"))) return true;
    } catch {
      return true;
    }
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The pid that runs the Go binary for a forked launcher. */
function workerPid(launcherPid, mode) {
  if (mode === "execve") return launcherPid;
  const kids = childrenOf(launcherPid);
  if (kids.length !== 1) throw new Error(`launcher has children ${kids.join(",") || "none"}, want one`);
  return kids[0];
}

const pkg = args["package-dir"];
const launcher = path.join(pkg, "worker.mjs");

// -- exec bit ---------------------------------------------------------------
for (const mode of MODES) {
  let problem;
  try {
    const dir = copyPackage();
    chmodSync(binaryIn(dir), 0o644);
    const w = start("fork", path.join(dir, "worker.mjs"), hostEnv(modeEnv(mode)));
    const reply = await w.initialize();
    if (reply?.result?.ok !== true) problem = `initialize replied ${JSON.stringify(reply)}`;
    w.child.stdin.end();
    await w.exited;
    const m = statSync(binaryIn(dir)).mode & 0o777;
    if (!problem && m !== 0o755) problem = `binary mode ${m.toString(8)} after launch, want 755`;
  } catch (err) {
    problem = err.message;
  }
  check(`${mode}: a binary without its exec bit is repaired and runs`, problem);
}

// -- missing platform -------------------------------------------------------
{
  let problem;
  try {
    const dir = copyPackage();
    rmSync(path.join(dir, "bin", target), { recursive: true });
    const w = start("fork", path.join(dir, "worker.mjs"), hostEnv());
    const e = await w.exited;
    const want = `no daytona-worker binary for this platform (${target})`;
    if (e.code === 0 || e.signal !== null) problem = `exit code=${e.code} signal=${e.signal}, want a non-zero code`;
    else if (w.out.stdout !== "") problem = `wrote to stdout: ${JSON.stringify(w.out.stdout.slice(0, 200))}`;
    else if (!w.out.stderr.includes(want)) problem = `stderr ${JSON.stringify(w.out.stderr)} does not say "${want}"`;
  } catch (err) {
    problem = err.message;
  }
  check("missing platform binary: one clear stderr line, non-zero exit, nothing on stdout", problem);
}

// -- fds and env of the worker ----------------------------------------------
for (const mode of MODES) {
  let problem;
  let detail;
  try {
    const w = start("fork", launcher, hostEnv(modeEnv(mode)));
    await w.initialize();
    const pid = workerPid(w.child.pid, mode);
    const fds = readdirSync(`/proc/${pid}/fd`).map((fd) => [Number(fd), readlinkSync(`/proc/${pid}/fd/${fd}`)]);
    const sockets = fds.filter(([fd, link]) => fd > 2 && link.startsWith("socket:"));
    if (sockets.length > 0) problem = `worker holds sockets beyond stdio: ${sockets.map(([fd, l]) => `${fd}->${l}`).join(" ")} (the IPC channel?)`;
    const env = readFileSync(`/proc/${pid}/environ`, "utf8");
    if (!problem && /(^|\0)NODE_CHANNEL_/.test(env)) problem = "worker env has NODE_CHANNEL_* variables";
    if (!problem && /(^|\0)DAYTONA_WORKER_LAUNCH=/.test(env)) problem = "worker env has the launcher's DAYTONA_WORKER_LAUNCH";
    detail = `worker pid ${pid}, ${fds.length} fds`;
    w.child.stdin.end();
    const e = await w.exited;
    if (!problem && (e.code !== 0 || e.signal !== null)) problem = `stdin EOF: exit code=${e.code} signal=${e.signal}, want 0`;
  } catch (err) {
    problem = err.message;
  }
  check(`${mode}: the worker gets fds 0-2 only (no IPC channel), no IPC env, exits 0 on stdin EOF`, problem, detail);
}

// -- exit mirroring with stand-in binaries ----------------------------------
const standIns = [
  { name: "exit code 7 is mirrored", script: "exit 7", want: { code: 7, signal: null } },
  { name: "death by SIGTERM is mirrored", script: "kill -TERM $$", want: { code: null, signal: "SIGTERM" } },
];
for (const s of standIns) {
  for (const mode of MODES) {
    let problem;
    try {
      const dir = copyPackage();
      writeFileSync(binaryIn(dir), `#!/bin/sh\n${s.script}\n`, { mode: 0o755 });
      const w = start("fork", path.join(dir, "worker.mjs"), hostEnv(modeEnv(mode)));
      const e = await w.exited;
      if (e.code !== s.want.code || e.signal !== s.want.signal) problem = `exit code=${e.code} signal=${e.signal}, want code=${s.want.code} signal=${s.want.signal}`;
      else if (w.out.stdout !== "") problem = `stdout ${JSON.stringify(w.out.stdout)}`;
    } catch (err) {
      problem = err.message;
    }
    check(`${mode}: ${s.name}`, problem);
  }
}

// -- signals reach the worker -------------------------------------------------
// The reference is the binary alone receiving the same signal after
// initialize; through the launcher the host must see the same outcome.
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) {
  let reference;
  try {
    const w = start("spawn", binaryIn(pkg), hostEnv());
    await w.initialize();
    w.child.kill(signal);
    reference = await w.exited;
  } catch (err) {
    check(`${signal} to the binary alone (reference)`, err.message);
    continue;
  }
  for (const mode of MODES) {
    let problem;
    try {
      const w = start("fork", launcher, hostEnv(modeEnv(mode)));
      await w.initialize();
      const pid = workerPid(w.child.pid, mode);
      w.child.kill(signal);
      const e = await w.exited;
      if (e.code !== reference.code || e.signal !== reference.signal) {
        problem = `launcher exit code=${e.code} signal=${e.signal}, binary alone code=${reference.code} signal=${reference.signal}`;
      } else if (!(await gone(pid, 2_000))) problem = `worker ${pid} still running`;
    } catch (err) {
      problem = err.message;
    }
    check(`${mode}: ${signal} to the launcher ends the worker like it ends the binary alone`, problem, `code=${reference.code} signal=${reference.signal}`);
  }
}

// -- SIGKILL of the launcher --------------------------------------------------
{
  let problem;
  let detail;
  try {
    const w = start("fork", launcher, hostEnv({ DAYTONA_WORKER_LAUNCH: "spawn" }));
    await w.initialize();
    const pid = workerPid(w.child.pid, "spawn");
    const t = performance.now();
    w.child.kill("SIGKILL");
    await w.exited;
    if (!(await gone(pid, 5_000))) problem = `worker ${pid} still running 5 s after its launcher was killed`;
    else detail = `worker gone ${Math.round(performance.now() - t)} ms after the SIGKILL`;
  } catch (err) {
    problem = err.message;
  }
  check("spawn: SIGKILL of the launcher leaves no worker behind", problem, detail);
}

rmSync(scratch, { recursive: true, force: true });
console.log(`[${label}] launcher: ${passed} passed, ${failed} failed`);
if (args["result-file"]) writeFileSync(args["result-file"], JSON.stringify({ passed, failed }));
process.exit(failed > 0 ? 1 : 0);
