// Interop harness: the packaged worker driven by the real worker manager of
// the published Paperclip host (@paperclipai/server 2026.916.1), minus the
// database. See docs/host.md#interop and interop/run.sh.
//
//   node harness.mjs --plugin-dir DIR --package NAME --worker-bin BIN --result-file FILE [--sim-bin SIM [--sim-latency 40ms]]
//
// DIR is a plugin directory the packed tarball was installed into the way the
// host installs plugins (npm install <tgz> --prefix DIR --save
// --ignore-scripts). BIN is the host build of daytona-worker, used to print
// both manifest profiles. Prints one line per check, writes
// {"passed":n,"failed":n} to FILE, exits 1 on any failure. With --sim-bin,
// the Daytona emulator (cmd/daytona-sim) runs as a fixture and its loopback
// apiUrl/apiKey become ctx.config for the steps; --sim-latency puts a
// network with that round trip between it and its clients (daytona-sim
// -rtt: per direction, on the connections, handshakes included).

import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readlinkSync, readdirSync, statSync, accessSync, constants as fsConstants, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { isDeepStrictEqual, parseArgs } from "node:util";

// The host logger picks its transport at import time: production = plain
// JSON lines (the dev logger would need pino-pretty).
process.env.NODE_ENV = "production";
process.env.PAPERCLIP_LOG_LEVEL ??= "info";

// A traced step runs inside a host trace, as a measured start-up step does:
// the manager then mints a traceparent into the request's invocation.
const { runWithRuntimeParent } = await import("@paperclipai/adapter-utils/acpx-engine/startup-timing");
const otel = await import("@opentelemetry/api");
const traceSpan = { traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", traceFlags: 1 };
const traceparent = `00-${traceSpan.traceId}-${traceSpan.spanId}-01`;

const here = path.dirname(fileURLToPath(import.meta.url));
const serverDist = path.join(here, "node_modules", "@paperclipai", "server", "dist");
const importServer = (rel) => import(pathToFileURL(path.join(serverDist, rel)).href);

const { values: args } = parseArgs({
  options: {
    "plugin-dir": { type: "string" },
    package: { type: "string", default: "paperclip-plugin-daytona-go" },
    "worker-bin": { type: "string" },
    "result-file": { type: "string" },
    "sim-bin": { type: "string" },
    "sim-latency": { type: "string" },
  },
});
for (const required of ["plugin-dir", "worker-bin"]) {
  if (!args[required]) {
    console.error(`harness: --${required} is required`);
    process.exit(2);
  }
}

const label = `node ${process.version}${args["sim-latency"] ? `, ${args["sim-latency"]} round trip` : ""}`;
let passed = 0;
let failed = 0;
function pass(name, detail) {
  passed++;
  console.log(`PASS [${label}] ${name}${detail ? ` (${detail})` : ""}`);
}
function fail(name, detail) {
  failed++;
  console.log(`FAIL [${label}] ${name}: ${detail}`);
}
function info(text) {
  console.log(`     [${label}] ${text}`);
}
function check(name, problem, detail) {
  if (problem) fail(name, problem);
  else pass(name, detail);
  return !problem;
}

// ---------------------------------------------------------------------------
// Host modules and log capture
// ---------------------------------------------------------------------------

const { logger } = await importServer("middleware/logger.js");
const { createPluginWorkerManager } = await importServer("services/plugin-worker-manager.js");
const { pluginManifestValidator } = await importServer("services/plugin-manifest-validator.js");
const { pluginCapabilityValidator } = await importServer("services/plugin-capability-validator.js");
const { pluginManifestV1Schema, resolveDeclaredSandboxCapabilities } = await import("@paperclipai/shared");
const { JsonRpcCallError } = await import("@paperclipai/plugin-sdk");
const { steps, fixtures, checkSupportedMethods, effectiveCapabilities } = await import("./steps.mjs");
const { daytonaSim } = await import("./fixtures.mjs");
if (args["sim-bin"]) fixtures.unshift(daytonaSim(args["sim-bin"], { latency: args["sim-latency"] }));

// Every host log record (the worker manager's own lines, "[plugin stderr]"
// lines, dropped stdout lines) is kept here instead of going to stdout, so
// checks can look at them and a failure can show them.
const hostLogs = [];
{
  let streamOwner = logger;
  let streamSym;
  while (streamOwner && !streamSym) {
    streamSym = Object.getOwnPropertySymbols(streamOwner).find((s) => s.description === "pino.stream");
    if (!streamSym) streamOwner = Object.getPrototypeOf(streamOwner);
  }
  if (!streamSym) {
    console.error("harness: cannot find the host logger's stream (pino internals changed)");
    process.exit(2);
  }
  const stream = logger[streamSym];
  stream.write = (line) => {
    for (const part of String(line).split("\n")) {
      if (part.trim() === "") continue;
      try {
        hostLogs.push(JSON.parse(part));
      } catch {
        hostLogs.push({ msg: part });
      }
    }
    return true;
  };
}
const logsMatching = (re) => hostLogs.filter((r) => re.test(String(r.msg ?? "")));

// ---------------------------------------------------------------------------
// Linux process inspection (which process runs the worker, its env)
// ---------------------------------------------------------------------------

const procExe = (pid) => {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return null;
  }
};
const procChildren = (pid) => {
  const out = [];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").trim();
      if (text) out.push(...text.split(/\s+/).map(Number));
    }
  } catch {
    // process gone or no /proc
  }
  return out;
};
const procEnvKeys = (pid) =>
  readFileSync(`/proc/${pid}/environ`, "utf8")
    .split("\0")
    .filter(Boolean)
    .map((kv) => kv.slice(0, kv.indexOf("=")))
    .sort();
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === "EPERM";
  }
};

// ---------------------------------------------------------------------------
// 1. Manifest profiles against the 2026.916.1 install-time validator
// ---------------------------------------------------------------------------

// Keys newer than 2026.916.1, by profile (docs/host.md#manifest-profiles):
// compat-2026.10 (the October 2026 hosts) adds one, current two.
const NEWER_DRIVER_KEYS = {
  "compat-2026.10": ["defaultAcquireTimeoutMs"],
  current: ["creationOperationVersion", "defaultAcquireTimeoutMs"],
};

function printManifest(profile) {
  return JSON.parse(execFileSync(args["worker-bin"], ["manifest", "--profile", profile], { encoding: "utf8" }));
}
function withoutKeys(manifest, keys) {
  const copy = structuredClone(manifest);
  for (const driver of copy.environmentDrivers ?? []) for (const k of keys) delete driver[k];
  return copy;
}
const describeIssues = (issues) =>
  issues.map((i) => `${i.code} at ${JSON.stringify(i.path)}${i.keys ? ` keys ${i.keys.join(",")}` : ""}: ${i.message}`).join("; ");

let compat = null;
const newer = {};
try {
  compat = printManifest("compat-2026.916");
  for (const profile of Object.keys(NEWER_DRIVER_KEYS)) newer[profile] = printManifest(profile);
} catch (err) {
  fail("daytona-worker manifest --profile prints every profile", err.message);
}
if (compat && Object.keys(newer).length === Object.keys(NEWER_DRIVER_KEYS).length) {
  const parsed = pluginManifestV1Schema.safeParse(compat);
  check(
    "manifest compat-2026.916 accepted by pluginManifestV1Schema",
    parsed.success ? undefined : describeIssues(parsed.error.issues),
    `id ${compat.id}, version ${compat.version}`,
  );
  const allNewer = [...new Set(Object.values(NEWER_DRIVER_KEYS).flat())];
  for (const [profile, want] of Object.entries(NEWER_DRIVER_KEYS)) {
    const m = newer[profile];
    const rejected = pluginManifestV1Schema.safeParse(m);
    let problem;
    if (rejected.success) {
      problem = `the ${profile} profile was accepted; 2026.916.1 must reject it`;
    } else {
      const keys = new Set();
      for (const issue of rejected.error.issues) {
        const onDriver = issue.code === "unrecognized_keys" && issue.path.length === 2 && issue.path[0] === "environmentDrivers";
        if (!onDriver) {
          problem = `unexpected issue: ${describeIssues([issue])}`;
          break;
        }
        for (const k of issue.keys) keys.add(k);
      }
      if (!problem && !isDeepStrictEqual([...keys].sort(), [...want].sort())) {
        problem = `rejected for keys ${[...keys].sort().join(",")}, want exactly ${want.join(",")}`;
      }
      // The profiles are distinct packages: the host refreshes a saved
      // manifest only when the version changes, so they never share one.
      if (!problem && m.version === compat.version) {
        problem = `${profile} and compat-2026.916 carry version ${compat.version}`;
      }
      if (!problem && !isDeepStrictEqual({ ...withoutKeys(m, want), version: compat.version }, compat)) {
        problem = `${profile} minus ${want.join(", ")} and its version differs from the compat profile`;
      }
    }
    check(`manifest ${profile} rejected by 2026.916.1 exactly for ${want.join(", ")}`, problem, `version ${m.version}`);
  }
  check(
    "the compat profile carries no newer driver key",
    allNewer.some((k) => (compat.environmentDrivers ?? []).some((d) => k in d)) ? "it does" : undefined,
  );
}

// ---------------------------------------------------------------------------
// 2. The installed package, read the way the plugin loader reads it
// ---------------------------------------------------------------------------

const packageDir = path.join(args["plugin-dir"], "node_modules", ...args.package.split("/"));
let manifest = null;
let entrypointPath = null;
{
  const name = "installed package loads like the host loader loads it";
  let problem;
  try {
    const pkg = JSON.parse(readFileSync(path.join(packageDir, "package.json"), "utf8"));
    const hooks = Object.keys(pkg.scripts ?? {});
    if (hooks.length > 0) throw new Error(`package.json declares scripts ${hooks.join(",")}; none may run at install`);
    const manifestRel = pkg.paperclipPlugin?.manifest;
    if (typeof manifestRel !== "string") throw new Error("package.json has no paperclipPlugin.manifest");
    const manifestPath = path.resolve(packageDir, manifestRel);
    const mod = await import(pathToFileURL(manifestPath).href);
    const raw = mod.default ?? mod;
    manifest = pluginManifestValidator().parseOrThrow(raw);
    const caps = pluginCapabilityValidator().validateManifestCapabilities(manifest);
    if (!caps.allowed) throw new Error(`capability validator: missing ${caps.missing.join(", ")}`);
    if (compat && !isDeepStrictEqual(raw, compat)) throw new Error("the packaged manifest.js is not the compat-2026.916 profile the binary prints");
    if (pkg.paperclipPlugin?.worker !== manifest.entrypoints.worker) {
      throw new Error(`paperclipPlugin.worker ${pkg.paperclipPlugin?.worker} differs from entrypoints.worker ${manifest.entrypoints.worker}`);
    }
    // resolveWorkerEntrypoint: relative to the package root, must stay inside it.
    entrypointPath = path.resolve(packageDir, manifest.entrypoints.worker);
    if (!entrypointPath.startsWith(path.resolve(packageDir))) throw new Error("entrypoints.worker escapes the package");
    if (!existsSync(entrypointPath)) throw new Error(`entrypoint ${entrypointPath} missing`);
    const binary = path.join(packageDir, "bin", `${process.platform}-${process.arch}`, "daytona-worker");
    if (!statSync(binary).isFile()) throw new Error(`${binary} is not a file`);
    accessSync(binary, fsConstants.X_OK);
  } catch (err) {
    problem = err.message;
  }
  check(name, problem, manifest ? `manifest ${manifest.id}@${manifest.version}` : undefined);
}

// ---------------------------------------------------------------------------
// 3. Start through createPluginWorkerManager, run the steps, stop
// ---------------------------------------------------------------------------

const pluginId = "00000000-0000-4000-8000-00000000d47a"; // a DB row id in the real server
const ctx = {
  config: {},
  workerEnv: {},
  state: {},
  ids: { companyId: "interop-company", environmentId: "interop-env", runId: "interop-run", agentId: "interop-agent" },
  logChunks: [],
  spans: [], // span.record requests of the step: { params, traceparent } (the host's own record)
  traceparent,
};

async function runWorker() {
  const started = [];
  for (const fixture of fixtures) {
    try {
      await fixture.start(ctx);
      started.push(fixture);
      pass(`fixture ${fixture.name} started`);
    } catch (err) {
      fail(`fixture ${fixture.name} started`, err.message);
      return started;
    }
  }

  const hostHandlerCalls = [];
  const manager = createPluginWorkerManager();
  let handle;
  const t0 = performance.now();
  try {
    handle = await manager.startWorker(pluginId, {
      entrypointPath,
      manifest,
      config: {},
      instanceInfo: { instanceId: "interop-instance", hostVersion: "2026.916.1", deploymentMode: "local_trusted", deploymentExposure: "private" },
      apiVersion: manifest.apiVersion,
      databaseNamespace: null,
      hostHandlers: {
        log: async (params) => {
          hostHandlerCalls.push({ method: "log", params });
          return null;
        },
        "span.record": async (params, context) => {
          ctx.spans.push({ params, traceparent: context?.traceparent });
          return null;
        },
      },
      autoRestart: false,
      // What the server's buildPluginWorkerEnv adds for a third-party
      // package; the manager adds PATH, NODE_PATH, NODE_ENV, TZ and
      // PAPERCLIP_PLUGIN_ID itself.
      env: { PAPERCLIP_DEPLOYMENT_MODE: "local_trusted", PAPERCLIP_DEPLOYMENT_EXPOSURE: "private", ...ctx.workerEnv },
    });
  } catch (err) {
    fail("initialize through createPluginWorkerManager", err.message);
    return started;
  }
  pass("initialize through createPluginWorkerManager", `${Math.round(performance.now() - t0)} ms from fork to the initialize reply`);

  const exits = [];
  handle.on("exit", (e) => exits.push(e));
  const pid = handle.diagnostics().pid;

  // Which process serves the protocol: with execve (Node >= 22.15) the forked
  // pid itself runs the Go binary; with the spawn fallback it stays Node and
  // the binary is its only child.
  let workerPid = null;
  {
    const exe = procExe(pid);
    const kids = procChildren(pid);
    const expectExecve = typeof process.execve === "function";
    let problem;
    let detail;
    if (exe === null) {
      problem = `cannot read /proc/${pid}/exe`;
    } else if (expectExecve) {
      if (path.basename(exe) !== "daytona-worker") problem = `pid ${pid} runs ${exe}, want the daytona-worker binary (execve)`;
      else if (kids.length !== 0) problem = `pid ${pid} has children ${kids.join(",")}`;
      else {
        workerPid = pid;
        detail = `execve: pid ${pid} is ${exe}`;
      }
    } else {
      const goKids = kids.filter((k) => path.basename(procExe(k) ?? "") === "daytona-worker");
      if (goKids.length !== 1 || kids.length !== 1) problem = `launcher ${pid} (${exe}) children ${kids.join(",") || "none"}, want exactly one daytona-worker`;
      else {
        workerPid = goKids[0];
        detail = `spawn fallback: launcher ${pid} (node), worker ${workerPid}`;
      }
    }
    check(`launcher hands stdio to the Go binary (${expectExecve ? "execve" : "spawn"})`, problem, detail);
  }

  if (workerPid !== null) {
    const allowed = ["NODE_ENV", "NODE_PATH", "PAPERCLIP_DEPLOYMENT_EXPOSURE", "PAPERCLIP_DEPLOYMENT_MODE", "PAPERCLIP_PLUGIN_ID", "PATH", "TZ", ...Object.keys(ctx.workerEnv)];
    // The spawn fallback tells the worker its launcher's pid (parent-death watch).
    if (typeof process.execve !== "function") allowed.push("DAYTONA_WORKER_PARENT_PID");
    let problem;
    try {
      const keys = procEnvKeys(workerPid);
      const extra = keys.filter((k) => !allowed.includes(k));
      if (extra.length > 0) problem = `unexpected variables ${extra.join(",")}`;
    } catch (err) {
      problem = err.message;
    }
    check("Go process sees only the host's minimal env (no IPC channel variables)", problem);
  }

  {
    const methods = handle.supportedMethods;
    info(`supportedMethods (${Array.isArray(methods) ? methods.length : "?"}): ${JSON.stringify(methods)}`);
    check("supportedMethods: distinct host-known methods, lifecycle methods listed", checkSupportedMethods(methods));
    // Effective capabilities (docs/host.md#capabilities): declared ∩ verified, as the
    // host computes them. Every declared capability must be verified.
    const driver = manifest.environmentDrivers?.[0];
    if (driver) {
      const declared = resolveDeclaredSandboxCapabilities(driver);
      const { effective, unverified } = effectiveCapabilities(declared, methods);
      ctx.capabilities = { declared, effective, unverified };
      const on = Object.keys(effective).filter((k) => effective[k]);
      info(`effective sandbox capabilities: ${on.length > 0 ? on.join(", ") : "none"}`);
      check("every declared sandbox capability is verified by the advertised methods",
        unverified.length === 0 ? undefined : `declared but not backed: ${unverified.join(", ")}`);
    }
  }

  for (const step of steps) {
    const reason = step.skip?.(ctx);
    if (reason) {
      info(`skip ${step.name}: ${reason}`);
      continue;
    }
    ctx.logChunks = [];
    ctx.spans = [];
    const timeoutMs = typeof step.timeoutMs === "function" ? step.timeoutMs(ctx) : step.timeoutMs;
    const sink = step.logSink ? (stream, chunk) => {
      ctx.logChunks.push({ stream, chunk });
      step.onLog?.(ctx, stream, chunk);
    } : undefined;
    const started = performance.now();
    let value;
    let error;
    try {
      const call = step.run ? () => step.run(handle, ctx) : () => handle.call(step.method, step.params(ctx), timeoutMs, sink);
      value = await (step.traced ? runWithRuntimeParent(otel.trace.setSpanContext(otel.context.active(), traceSpan), call) : call());
    } catch (err) {
      error = err;
    }
    const ms = `${Math.round(performance.now() - started)} ms`;
    let problem;
    if (step.expectError !== undefined) {
      if (!error) problem = `succeeded with ${JSON.stringify(value)}, want error ${step.expectError}`;
      else if (!(error instanceof JsonRpcCallError) || error.code !== step.expectError) problem = `error ${error.code ?? "?"} ${error.message}, want ${step.expectError}`;
      else problem = step.check?.(error, ctx);
    } else if (error) {
      problem = `error ${error.code ?? ""} ${error.message}`;
    } else {
      try {
        problem = step.check?.(value, ctx);
      } catch (err) {
        problem = `check threw: ${err.message}`;
      }
    }
    check(step.name, problem, ms);
  }

  check("worker still running after the steps", handle.status === "running" ? undefined : `status ${handle.status}`);

  // Shutdown exactly as the server stops a plugin: shutdown RPC, 10 s drain,
  // 0.5 s grace, then SIGTERM / SIGKILL escalation (which must not happen).
  const tStop = performance.now();
  await manager.stopWorker(pluginId);
  const stopMs = Math.round(performance.now() - tStop);
  {
    let problem;
    const escalated = logsMatching(/SIGTERM|SIGKILL|shutdown RPC failed/);
    if (exits.length !== 1) problem = `${exits.length} exit events`;
    else if (exits[0].code !== 0 || exits[0].signal !== null) problem = `exit code=${exits[0].code} signal=${exits[0].signal}, want code 0 and no signal`;
    else if (escalated.length > 0) problem = `the host escalated: ${escalated.map((r) => r.msg).join("; ")}`;
    else if (handle.status !== "stopped") problem = `status ${handle.status}`;
    check("shutdown: the worker exits by itself with code 0, no signal", problem, `${stopMs} ms from stopWorker to exit`);
  }
  {
    const left = [pid, workerPid].filter((p) => p !== null && alive(p));
    check("no worker process left behind", left.length > 0 ? `still alive: ${left.join(",")}` : undefined);
  }
  {
    const dropped = logsMatching(/unparseable message from worker|unknown message type from worker|received response for unknown request id/);
    check(
      "every worker stdout line was a protocol frame",
      dropped.length > 0 ? dropped.map((r) => r.msg).join("; ") : undefined,
    );
    const stderrLines = logsMatching(/^\[plugin stderr\]/).length;
    info(`host log: ${hostLogs.length} records, ${stderrLines} [plugin stderr] lines, ${hostHandlerCalls.length} worker->host requests`);
  }
  return started;
}

if (manifest && entrypointPath) {
  const started = await runWorker();
  for (const fixture of started.reverse()) {
    try {
      await fixture.stop(ctx);
      pass(`fixture ${fixture.name} stopped`);
    } catch (err) {
      fail(`fixture ${fixture.name} stopped`, err.message);
    }
  }
} else {
  fail("initialize through createPluginWorkerManager", "skipped: the installed package did not load");
}

if (failed > 0) {
  console.log(`---- host log records (${hostLogs.length}) ----`);
  for (const r of hostLogs) console.log(JSON.stringify(r));
  console.log("----");
}
console.log(`[${label}] ${passed} passed, ${failed} failed`);
if (args["result-file"]) writeFileSync(args["result-file"], JSON.stringify({ passed, failed }));
process.exit(failed > 0 ? 1 : 0);
