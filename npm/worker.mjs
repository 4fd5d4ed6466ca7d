// Paperclip plugin worker entrypoint for daytona-worker.
//
// The Paperclip host always runs `node <entrypoints.worker>` through
// child_process.fork (stdio pipe/pipe/pipe + an IPC channel on fd 3), so this
// file is the entrypoint, and its only job is to hand fds 0-2 to the native Go
// binary that speaks the NDJSON JSON-RPC protocol:
//
//   - process.execve (Node >= 22.15 / 23.11 on POSIX) replaces this process
//     with the binary: same PID, same fds 0-2, so the host's signals and its
//     exit-code checks apply to the Go process directly and no Node process
//     stays resident.
//   - Otherwise the binary is spawned with fds 0-2 inherited (the IPC channel
//     is not forwarded: the protocol never uses it), signals are relayed and
//     the child's exit is mirrored. The binary watches its parent, so a SIGKILL
//     of this launcher does not leave it running.
//
// stdout belongs to the protocol: this file never writes to it. Problems go to
// stderr, which the host logs and appends to failure messages. No
// dependencies: the package is installed with --ignore-scripts and nothing
// else runs at install time.

import { spawn } from "node:child_process";
import { accessSync, chmodSync, constants as fsConstants, readdirSync, statSync, writeSync } from "node:fs";
import { constants as osConstants } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const BINARY_NAME = "daytona-worker";

// Test and benchmark hook: "spawn" forces the fallback path even where execve
// exists. The host passes a scrubbed environment, so in production this is
// never set and the launcher picks execve whenever Node has it.
const MODE_ENV = "DAYTONA_WORKER_LAUNCH";

// Environment entries that belong to fork's IPC channel. The binary must not
// see them: it did not inherit the channel and must not try to use one.
const IPC_ENV = ["NODE_CHANNEL_FD", "NODE_CHANNEL_SERIALIZATION_MODE"];

const RELAYED_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"];

function die(message, code = 1) {
  // writeSync: process.stderr is asynchronous for pipes on some platforms and
  // the process exits right after this line.
  try {
    writeSync(2, `daytona-worker launcher: ${message}\n`);
  } catch {
    // stderr closed: nothing left to tell anyone.
  }
  process.exit(code);
}

function availableTargets(binRoot) {
  try {
    return readdirSync(binRoot, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name)
      .sort();
  } catch {
    return [];
  }
}

// resolveBinary finds bin/<platform>-<arch>/daytona-worker next to this file
// (never relative to cwd: the host does not set one for the worker).
function resolveBinary() {
  const here = dirname(fileURLToPath(import.meta.url));
  const binRoot = join(here, "bin");
  const target = `${process.platform}-${process.arch}`;
  const binary = join(binRoot, target, BINARY_NAME);
  let info;
  try {
    info = statSync(binary);
  } catch {
    const built = availableTargets(binRoot);
    die(
      `no ${BINARY_NAME} binary for this platform (${target}): ${binary} does not exist. ` +
        `This package ships binaries for: ${built.length > 0 ? built.join(", ") : "none"}. ` +
        `Install a release built for ${target}.`,
    );
  }
  if (!info.isFile()) die(`${binary} is not a regular file`);
  return binary;
}

// ensureExecutable restores the exec bit that some install paths drop
// (tarball extraction with a restrictive umask, copies through tools that do
// not keep modes). execve on a non-executable file aborts Node with a native
// stack trace, so this is checked before either launch path.
function ensureExecutable(binary) {
  try {
    accessSync(binary, fsConstants.X_OK);
    return;
  } catch {
    // fall through and try to repair
  }
  try {
    chmodSync(binary, 0o755);
    accessSync(binary, fsConstants.X_OK);
  } catch (err) {
    die(
      `${binary} is not executable and could not be made executable (${err?.code ?? err}); ` +
        `run: chmod 0755 '${binary}' (a filesystem mounted noexec cannot run it at all)`,
    );
  }
}

function childEnv() {
  const env = { ...process.env };
  for (const key of IPC_ENV) delete env[key];
  delete env[MODE_ENV];
  return env;
}

function launchWithExecve(binary, env) {
  // argv[0] is the binary path; the Go program does not depend on it.
  process.execve(binary, [binary], env);
}

function launchWithSpawn(binary, env) {
  // Only fds 0-2 are inherited; fd 3 (the IPC channel) is not passed on.
  // The worker watches its parent; naming the launcher's pid lets it notice
  // a SIGKILLed launcher even if that happened before it looked.
  const child = spawn(binary, [], {
    stdio: ["inherit", "inherit", "inherit"],
    env: { ...env, DAYTONA_WORKER_PARENT_PID: String(process.pid) },
  });

  // The IPC channel must not keep this process alive on its own, and this
  // process never reads it.
  process.channel?.unref?.();

  const relays = new Map();
  for (const signal of RELAYED_SIGNALS) {
    const relay = () => {
      try {
        child.kill(signal);
      } catch {
        // Child already gone: its exit handler mirrors the outcome.
      }
    };
    relays.set(signal, relay);
    process.on(signal, relay);
  }

  child.on("error", (err) => {
    die(`could not start ${binary}: ${err?.message ?? err}`);
  });

  child.on("exit", (code, signal) => {
    for (const [sig, relay] of relays) process.removeListener(sig, relay);
    if (signal) {
      // Re-raise so the host sees the same signal it would have seen without
      // the launcher in between. Node ignores some signals by default
      // (SIGPIPE), hence the numeric exit afterwards.
      try {
        process.kill(process.pid, signal);
      } catch {
        // fall through
      }
      process.exit(128 + (osConstants.signals[signal] ?? 0));
    }
    process.exit(code ?? 1);
  });
}

function main() {
  if (process.platform === "win32") {
    die("Windows is not supported; run the Paperclip host on Linux or macOS");
  }
  const binary = resolveBinary();
  ensureExecutable(binary);
  const env = childEnv();
  const forceSpawn = process.env[MODE_ENV] === "spawn";
  if (!forceSpawn && typeof process.execve === "function") {
    launchWithExecve(binary, env);
    return; // not reached: execve either replaces the process or aborts it
  }
  launchWithSpawn(binary, env);
}

main();
