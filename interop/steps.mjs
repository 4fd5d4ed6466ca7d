// The calls the interop harness makes through the real host worker manager,
// in order, after `initialize` and before `shutdown`. To cover another method,
// append a step; harness.mjs needs no change.
//
// A step:
//   name        printed as the check name
//   method      the JSON-RPC method the host calls
//   params(ctx) the params object (use ctx.config, ctx.state, ctx.ids)
//   timeoutMs   optional: a number, or (ctx) => number, passed to the host's
//               call() exactly as the server would (sandboxRpc/executeRpc);
//               omitted = the manager's 30 s default
//   expectError optional: the JSON-RPC error code the call must fail with
//   logSink     optional: true to pass an execute-log sink like executeRpc
//               does; {stream, chunk} entries land in ctx.logChunks (reset per step)
//   onLog(ctx, stream, chunk)
//               optional: called for each execute-log chunk as it arrives
//   traced      optional: true to call inside a host trace (a measured
//               start-up step); the worker's span.record requests land in
//               ctx.spans as {params, traceparent} (reset per step), and
//               ctx.traceparent is the parent the host minted
//   run(handle, ctx)
//               optional, instead of params: drives the worker handle itself
//               (openLoginPtySession, openDuplexChannel); its value is checked
//   skip(ctx)   optional: return a reason string to skip the step
//   check(value, ctx)
//               value is the result (or the JsonRpcCallError when
//               expectError is set); return undefined when it is right, or a
//               string saying what is wrong; may keep values in ctx.state for
//               later steps
//
// A fixture (e.g. the Daytona emulator, cmd/daytona-sim) starts before the
// worker and stops after it:
//   { name, start: async (ctx) => {...}, stop: async (ctx) => {...} }
// start() may fill ctx.config (the environment config the steps pass) and
// ctx.workerEnv (extra entries for the worker's environment, as the server's
// buildPluginWorkerEnv would add them).
//
// Example (once the worker serves it, with the daytona-sim fixture running):
//   {
//     name: "environmentAcquireLease returns a lease",
//     method: "environmentAcquireLease",
//     params: (ctx) => ({ ...baseParams(ctx), runId: ctx.ids.runId, agentId: ctx.ids.agentId, adapterType: "claude_local" }),
//     timeoutMs: (ctx) => sandboxRpc(ctx.config),
//     check(lease, ctx) {
//       if (typeof lease?.providerLeaseId !== "string" || lease.providerLeaseId === "") return "no providerLeaseId";
//       ctx.state.lease = lease;
//     },
//   }

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { HOST_TO_WORKER_OPTIONAL_METHODS, HOST_TO_WORKER_REQUIRED_METHODS } from "@paperclipai/plugin-sdk";
import { channelSteps } from "./channels.mjs";

/** The base params of every environment method but validate (docs/host.md#config). */
function isLink(p) {
  try { return fs.lstatSync(p).isSymbolicLink(); } catch { return false; }
}

export function baseParams(ctx) {
  return { driverKey: "daytona", companyId: ctx.ids.companyId, environmentId: ctx.ids.environmentId, issueId: null, config: ctx.config };
}

const positive = (x) => typeof x === "number" && Number.isFinite(x) && x > 0;

/** The host's sandboxRpc(config) timeout (docs/host.md#host-timeouts); undefined = the 30 s default. */
export function sandboxRpc(config) {
  const budgets = [config?.timeoutMs, config?.bridgeRequestTimeoutMs].filter(positive);
  return budgets.length > 0 ? Math.max(...budgets) + 30_000 : undefined;
}

/** The host's executeRpc(requested, config) timeout (docs/host.md#host-timeouts). */
export function executeRpc(requested, config) {
  const budget = positive(requested) ? requested : config?.timeoutMs;
  return positive(budget) ? budget + 30_000 : undefined;
}

// Capability -> worker methods that must all be advertised (docs/host.md#capabilities).
const CAPABILITY_PREREQUISITES = {
  reusableLeases: ["environmentResumeLease", "environmentReleaseLease", "environmentDestroyLease"],
  nativeSyncIn: ["environmentSyncIn"],
  nativeSyncOut: ["environmentSyncOut"],
  persistentProcessSessions: ["environmentExecute"],
  independentControlCommands: ["environmentExecute"],
  incrementalSessionOutput: ["environmentExecute"],
  concurrentSyncOperations: ["environmentSyncIn", "environmentSyncOut"],
  duplexCommandStream: ["duplexChannelOpen"],
  runnerWebSocketIngress: ["environmentRunnerIngressEndpoint"],
};

/**
 * Effective capabilities before per-lease narrowing (docs/host.md#capabilities):
 * declared (resolveDeclaredSandboxCapabilities of the driver) ∩ verified
 * (prerequisite methods in supportedMethods). Returns {effective, unverified}:
 * unverified lists declared capabilities whose methods are not advertised.
 */
export function effectiveCapabilities(declared, supportedMethods) {
  const advertised = new Set(supportedMethods ?? []);
  const effective = {};
  const unverified = [];
  for (const [cap, methods] of Object.entries(CAPABILITY_PREREQUISITES)) {
    const verified = methods.every((m) => advertised.has(m));
    effective[cap] = declared?.[cap] === true && verified;
    if (declared?.[cap] === true && !verified) unverified.push(cap);
  }
  return { effective, unverified };
}

/** Fixtures started before the worker, stopped (in reverse order) after it. */
export const fixtures = [];

const LIFECYCLE_METHODS = ["initialize", "health", "shutdown", "configChanged"];
// Methods of the newer host contract (docs/host.md#newer-contract) the worker serves;
// 2026.916.1 does not know them and never calls them, which is harmless.
// prepareIdleSleep/releaseIdleSleep are the October SDK's idle drain (docs/host.md).
const NEWER_CONTRACT_METHODS = ["environmentStopLease", "prepareIdleSleep", "releaseIdleSleep"];
const KNOWN_METHODS = new Set([...HOST_TO_WORKER_REQUIRED_METHODS, ...HOST_TO_WORKER_OPTIONAL_METHODS, ...NEWER_CONTRACT_METHODS]);

/** Checks the handshake's supportedMethods; undefined when right, else what is wrong. */
export function checkSupportedMethods(methods) {
  if (!Array.isArray(methods)) return `supportedMethods is ${typeof methods}, want an array`;
  const seen = new Set();
  for (const m of methods) {
    if (typeof m !== "string" || m === "") return `supportedMethods holds a non-string or empty entry ${JSON.stringify(m)}`;
    if (seen.has(m)) return `supportedMethods lists ${m} twice`;
    seen.add(m);
    if (!KNOWN_METHODS.has(m)) return `supportedMethods lists ${m}, which the 2026.916.1 host does not know`;
  }
  // The worker's method registry is the single source of the list, so the
  // lifecycle methods it serves appear in it too (harmless for the host).
  const missing = LIFECYCLE_METHODS.filter((m) => !seen.has(m));
  if (missing.length > 0) return `supportedMethods lacks ${missing.join(", ")}`;
  return undefined;
}

/**
 * A step on the lease an earlier step acquired (ctx.state.lease): skipped
 * without one; its params name the lease by id and metadata, with the config
 * in ctx.state[configKey] ("config" as validated, "leaseConfig" with the
 * lease metadata merged in).
 */
const onLease = (configKey, step) => ({
  skip: (ctx) => (ctx.state.lease ? undefined : "no lease"),
  params: (ctx) => ({ ...baseParams(ctx), config: ctx.state[configKey], providerLeaseId: ctx.state.lease.providerLeaseId,
    leaseMetadata: ctx.state.lease.metadata }),
  ...step,
});

/** A check that the answer is a receipt for that lease in the given state. */
const receiptIn = (state) => (receipt, ctx) => {
  if (receipt?.providerLeaseId !== ctx.state.lease.providerLeaseId || receipt?.state !== state) {
    return `receipt ${JSON.stringify(receipt)}`;
  }
};

/**
 * The params of a sync on that lease: one operation that copies the
 * directory sourcePath to targetPath, with extra fields of the operation.
 */
const syncDirParams = (ctx, operationId, sourcePath, targetPath, extra = {}) => ({
  ...baseParams(ctx), config: ctx.state.leaseConfig, lease: ctx.state.lease,
  operations: [{ operationId, files: [{ sourcePath, targetPath, kind: "directory" }], ...extra }],
});

/** A runner connect path (one segment under the prefix the ingress accepts). */
const RUNNER_CONNECT_PATH = "/api/runner/v1/connect/00000000-0000-4000-8000-000000000001";

/** Params of an interactive-setup call on the setup sandbox ctx.state.setup. */
const onSetup = (step) => ({
  skip: (ctx) => (ctx.state.setup ? undefined : "no setup sandbox"),
  timeoutMs: (ctx) => executeRpc(undefined, ctx.state.config),
  ...step,
  params: (ctx) => ({ ...baseParams(ctx), config: ctx.state.config, providerLeaseId: ctx.state.setup.providerLeaseId,
    setupMetadata: ctx.state.setup.metadata, ...step.params(ctx) }),
});

export const steps = [
  {
    name: "health answers status ok",
    method: "health",
    params: () => ({}),
    check(result) {
      if (result === null || typeof result !== "object") return `result ${JSON.stringify(result)} is not an object`;
      if (result.status !== "ok") return `status ${JSON.stringify(result.status)}, want "ok"`;
      return undefined;
    },
  },
  {
    name: "configChanged answers null",
    method: "configChanged",
    params: () => ({ config: {}, companyId: null }),
    check(result) {
      return result === null ? undefined : `result ${JSON.stringify(result)}, want null`;
    },
  },
  {
    name: "unknown method is an error -32601, not a timeout",
    method: "interopNoSuchMethod",
    params: () => ({}),
    // Short on purpose: a worker that drops the request shows up as -32003
    // after 5 s instead of after the 30 s default.
    timeoutMs: 5_000,
    expectError: -32601,
    check(err) {
      return typeof err.message === "string" && err.message !== "" ? undefined : "error has no message";
    },
  },
  {
    name: "health still ok after the error",
    method: "health",
    params: () => ({}),
    check(result) {
      return result?.status === "ok" ? undefined : `result ${JSON.stringify(result)}`;
    },
  },
  // The lease lifecycle against cmd/daytona-sim (issue #4): validate →
  // acquire → realize → release → resume → destroy, with the params and
  // timeouts the server uses. Later configs are rebuilt from lease metadata,
  // as the host does (docs/host.md#config).
  {
    name: "environmentValidateConfig normalizes a reusable config",
    method: "environmentValidateConfig",
    skip: (ctx) => (ctx.config?.apiUrl ? undefined : "no daytona-sim"),
    params: (ctx) => ({ driverKey: "daytona", config: { ...ctx.config, reuseLease: true } }),
    check(result, ctx) {
      if (result?.ok !== true) return `ok ${result?.ok}: ${JSON.stringify(result?.errors)}`;
      const n = result.normalizedConfig;
      if (n?.timeoutMs !== ctx.config.timeoutMs || n?.reuseLease !== true) return "normalizedConfig lost timeoutMs/reuseLease";
      ctx.state.config = n; // what the host persists
    },
  },
  {
    name: "environmentAcquireLease returns a started sandbox lease",
    method: "environmentAcquireLease",
    skip: (ctx) => (ctx.state.config ? undefined : "validate did not pass"),
    params: (ctx) => ({ ...baseParams(ctx), config: ctx.state.config, runId: ctx.ids.runId, agentId: ctx.ids.agentId,
      executionWorkspaceId: "interop-workspace", adapterType: "claude_local" }),
    timeoutMs: (ctx) => sandboxRpc(ctx.state.config),
    check(lease, ctx) {
      if (typeof lease?.providerLeaseId !== "string" || lease.providerLeaseId === "") return "no providerLeaseId";
      const md = lease.metadata ?? {};
      if (md.provider !== "daytona" || typeof md.remoteCwd !== "string" || !["bash", "sh"].includes(md.shellCommand)) {
        return `metadata ${JSON.stringify(md)}`;
      }
      for (const k of ["pluginId", "pluginKey", "driver", "agentId", "sandboxProviderPlugin"]) {
        if (k in md) return `metadata carries host-owned key ${k}`;
      }
      if (md.workspaceSentinel?.result !== "written") return "sentinel not written";
      ctx.state.lease = lease;
      ctx.state.leaseConfig = { ...ctx.state.config, ...md };
    },
  },
  {
    name: "environmentRealizeWorkspace returns the remote cwd",
    method: "environmentRealizeWorkspace",
    skip: (ctx) => (ctx.state.lease ? undefined : "no lease"),
    params: (ctx) => ({ ...baseParams(ctx), config: ctx.state.leaseConfig, lease: ctx.state.lease,
      workspace: { localPath: "/tmp/interop-local", remotePath: ctx.state.lease.metadata.remoteCwd } }),
    timeoutMs: (ctx) => sandboxRpc(ctx.state.leaseConfig),
    check(result, ctx) {
      return result?.cwd === ctx.state.lease.metadata.remoteCwd ? undefined : `cwd ${JSON.stringify(result?.cwd)}`;
    },
  },
  {
    name: "environmentExecute streams execute.log chunks that prefix the final output",
    method: "environmentExecute",
    skip: (ctx) => (ctx.state.lease ? undefined : "no lease"),
    // The command keeps running after its output until the host has seen a
    // live chunk (it then creates the gate file in the emulated sandbox's
    // work dir, through its host path), so the check does not depend on whether the
    // worker's first read comes before or after the exit: output of a
    // command that already ended goes to the result only. With no live chunk
    // the command gives up after 60 s and the check fails.
    params: (ctx) => ({ ...baseParams(ctx), config: ctx.state.leaseConfig, lease: ctx.state.lease, command: "bash",
      args: ["-c", "for i in $(seq 1 200); do echo \"line $i é😀\"; done; echo done >&2; " +
        "for i in $(seq 1 600); do [ -e .interop-live-seen ] && break; sleep 0.1; done; rm -f .interop-live-seen; exit 7"], timeoutMs: 120_000 }),
    timeoutMs: (ctx) => executeRpc(120_000, ctx.state.leaseConfig),
    logSink: true,
    onLog(ctx) {
      if (ctx.logChunks.length === 1) fs.writeFileSync(simHostPath(ctx, path.join(ctx.state.lease.metadata.remoteCwd, ".interop-live-seen")), "");
    },
    check(result, ctx) {
      if (result?.exitCode !== 7 || result?.timedOut !== false) return `exitCode ${result?.exitCode} timedOut ${result?.timedOut}`;
      const want = Array.from({ length: 200 }, (_, i) => `line ${i + 1} é😀\n`).join("");
      if (result.stdout !== want) return `stdout differs (${result.stdout.length} chars)`;
      if (result.stderr !== "done\n") return `stderr ${JSON.stringify(result.stderr)}`;
      if (ctx.logChunks.length === 0) return "no execute.log chunk reached the host";
      for (const stream of ["stdout", "stderr"]) {
        const live = ctx.logChunks.filter((c) => c.stream === stream).map((c) => c.chunk).join("");
        if (!result[stream].startsWith(live)) return `streamed ${stream} is not a prefix of the final ${stream}`;
      }
    },
  },
  {
    name: "environmentSyncIn uploads a tree and runs its post-upload command",
    method: "environmentSyncIn",
    skip: (ctx) => (ctx.state.lease ? undefined : "no lease"),
    params: (ctx) => {
      const src = fs.mkdtempSync(path.join(os.tmpdir(), "interop-sync-in-"));
      fs.mkdirSync(path.join(src, "dir", "empty"), { recursive: true });
      fs.writeFileSync(path.join(src, "dir", "hello.txt"), "hello from the host\n");
      fs.writeFileSync(path.join(src, "secret.txt"), "s3cret\n", { mode: 0o600 });
      ctx.state.syncSrc = src;
      ctx.state.syncRemote = `${ctx.state.lease.metadata.remoteCwd}/interop-sync`;
      return syncDirParams(ctx, "interop-in", src, ctx.state.syncRemote, {
        postUploadCommands: [{ command: "test -f interop-sync/dir/hello.txt && echo ok > interop-sync/post-upload.txt" }],
      });
    },
    timeoutMs: (ctx) => sandboxRpc(ctx.state.leaseConfig),
    traced: true,
    check(result, ctx) {
      const op = result?.operations?.[0];
      if (op?.operationId !== "interop-in" || !(op.filesTransferred >= 2)) return `result ${JSON.stringify(result)}`;
      // The provider spans reached the host's span.record handler under
      // the trace the host minted for this call.
      const names = ctx.spans.map((s) => s.params?.name);
      // "list": the delta sync's listing of the target (docs/sync.md#delta).
      const want = ["list", "pack", "transfer", "extractTarball", "postUploadCommand"];
      if (!isDeepStrictEqual(names, want)) return `spans ${JSON.stringify(names)}, want ${JSON.stringify(want)}`;
      for (const s of ctx.spans) {
        if (s.traceparent !== ctx.traceparent) return `span ${s.params.name} under traceparent ${s.traceparent}`;
        if (s.params.attributes?.["paperclip.sandbox.startup.provider"] !== "daytona" || s.params.status) return `span ${JSON.stringify(s.params)}`;
        if (!(s.params.startTimeMs <= s.params.endTimeMs)) return `span times ${JSON.stringify(s.params)}`;
      }
    },
  },
  {
    name: "environmentSyncOut downloads it back intact",
    method: "environmentSyncOut",
    skip: (ctx) => (ctx.state.syncRemote ? undefined : "no syncIn"),
    params: (ctx) => {
      ctx.state.syncOut = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "interop-sync-out-")), "tree");
      return syncDirParams(ctx, "interop-out", ctx.state.syncRemote, ctx.state.syncOut);
    },
    timeoutMs: (ctx) => sandboxRpc(ctx.state.leaseConfig),
    check(result, ctx) {
      try {
        const out = ctx.state.syncOut;
        if (fs.readFileSync(path.join(out, "dir", "hello.txt"), "utf8") !== "hello from the host\n") return "hello.txt differs";
        if (fs.readFileSync(path.join(out, "post-upload.txt"), "utf8") !== "ok\n") return "post-upload command output missing";
        if (!fs.statSync(path.join(out, "dir", "empty")).isDirectory()) return "empty directory lost";
        if ((fs.statSync(path.join(out, "secret.txt")).mode & 0o777) !== 0o600) return "mode of secret.txt not kept";
      } catch (err) {
        return err.message;
      } finally {
        fs.rmSync(ctx.state.syncSrc, { recursive: true, force: true });
        fs.rmSync(path.dirname(ctx.state.syncOut), { recursive: true, force: true });
      }
      if (result?.operations?.[0]?.operationId !== "interop-out") return `result ${JSON.stringify(result)}`;
      if (ctx.spans.length > 0) return `an untraced call sent spans ${JSON.stringify(ctx.spans)}`;
    },
  },
  {
    name: "environmentExecute builds a workspace with a Python venv and node_modules in the sandbox",
    method: "environmentExecute",
    skip: (ctx) => (ctx.state.lease ? undefined : "no lease"),
    params: (ctx) => ({ ...baseParams(ctx), config: ctx.state.leaseConfig, lease: ctx.state.lease, command: "sh",
      args: ["-c", [
        "set -e", "rm -rf proj", "mkdir -p proj/.venv/bin proj/src proj/node_modules/pkg proj/node_modules/.bin",
        "echo x > proj/src/main.py", "ln -s /usr/bin/python3 proj/.venv/bin/python3", "ln -s python3 proj/.venv/bin/python",
        "echo 'console.log(1)' > proj/node_modules/pkg/cli.js", "ln -s ../pkg/cli.js proj/node_modules/.bin/pkg",
      ].join("\n")], timeoutMs: 60_000 }),
    timeoutMs: (ctx) => executeRpc(60_000, ctx.state.leaseConfig),
    check(result, ctx) {
      if (result?.exitCode !== 0) return `exit ${result?.exitCode}: ${JSON.stringify(result?.stderr)}`;
      ctx.state.venvRemote = `${ctx.state.lease.metadata.remoteCwd}/proj`;
    },
  },
  {
    name: "environmentSyncOut exports the venv workspace, omitting only the link that leaves it",
    method: "environmentSyncOut",
    skip: (ctx) => (ctx.state.venvRemote ? undefined : "no venv workspace"),
    params: (ctx) => {
      ctx.state.venvOut = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "interop-venv-out-")), "proj");
      return syncDirParams(ctx, "interop-venv", ctx.state.venvRemote, ctx.state.venvOut);
    },
    timeoutMs: (ctx) => sandboxRpc(ctx.state.leaseConfig),
    check(result, ctx) {
      const out = ctx.state.venvOut;
      try {
        if (fs.readFileSync(path.join(out, "src", "main.py"), "utf8") !== "x\n") return "src/main.py differs";
        if (fs.existsSync(path.join(out, ".venv", "bin", "python3")) || isLink(path.join(out, ".venv", "bin", "python3"))) {
          return "the absolute link .venv/bin/python3 was exported";
        }
        if (fs.readlinkSync(path.join(out, ".venv", "bin", "python")) !== "python3") return "in-tree link .venv/bin/python lost";
        if (fs.readlinkSync(path.join(out, "node_modules", ".bin", "pkg")) !== "../pkg/cli.js") return "node_modules/.bin/pkg link lost";
        if (fs.readFileSync(path.join(out, "node_modules", ".bin", "pkg"), "utf8") !== "console.log(1)\n") return "node_modules link does not resolve";
      } catch (err) {
        return err.message;
      } finally {
        fs.rmSync(path.dirname(out), { recursive: true, force: true });
      }
      const op = result?.operations?.[0];
      const omitted = op?.metadata?.omittedUnsafeLinks;
      if (op?.operationId !== "interop-venv" || omitted?.count !== 1 || omitted?.paths?.[0] !== `${ctx.state.venvRemote}/.venv/bin/python3`) {
        return `result ${JSON.stringify(result)}`;
      }
    },
  },
  // Login terminal and duplex channel on the live lease (interop/channels.mjs).
  ...channelSteps,
  onLease("leaseConfig", {
    name: "environmentReleaseLease stops a reusable sandbox with a receipt",
    method: "environmentReleaseLease",
    timeoutMs: (ctx) => sandboxRpc(ctx.state.leaseConfig),
    check: receiptIn("stopped"),
  }),
  onLease("config", {
    name: "environmentResumeLease restarts it after the sentinel matches",
    method: "environmentResumeLease",
    timeoutMs: (ctx) => Math.min(sandboxRpc(ctx.state.config) ?? 60_000, 60_000),
    check(lease, ctx) {
      if (lease?.providerLeaseId !== ctx.state.lease.providerLeaseId) return `providerLeaseId ${JSON.stringify(lease?.providerLeaseId)}`;
      if (lease.metadata?.workspaceSentinel?.result !== "matched" || lease.metadata?.resumedLease !== true) {
        return `metadata ${JSON.stringify(lease.metadata)}`;
      }
      ctx.state.lease = lease;
      ctx.state.leaseConfig = { ...ctx.state.config, ...lease.metadata };
    },
  }),
  {
    name: "environmentRunnerIngressEndpoint returns a private wss: endpoint with the token only in a secret header",
    method: "environmentRunnerIngressEndpoint",
    skip: (ctx) => (ctx.state.lease ? undefined : "no lease"),
    params: (ctx) => ({ ...baseParams(ctx), config: ctx.state.leaseConfig, lease: ctx.state.lease, port: 43127,
      path: RUNNER_CONNECT_PATH }),
    timeoutMs: (ctx) => sandboxRpc(ctx.state.leaseConfig),
    check(ep) {
      // The host's acceptance rules for the reply (docs/host.md).
      let u;
      try { u = new URL(ep?.websocketUrl); } catch { return `websocketUrl ${JSON.stringify(ep?.websocketUrl)}`; }
      if (ep.kind !== "authenticated_websocket" || u.protocol !== "wss:" || u.username || u.password || u.search || u.hash) {
        return `endpoint ${JSON.stringify({ ...ep, secretHeaders: undefined })}`;
      }
      if (u.pathname !== RUNNER_CONNECT_PATH) return `path ${u.pathname}`;
      if (!/^[0-9a-f]{64}$/.test(ep.generation ?? "")) return `generation ${JSON.stringify(ep.generation)}`;
      const h = ep.secretHeaders;
      if (!Array.isArray(h) || h.length !== 1 || h[0].name !== "X-Daytona-Preview-Token" || !h[0].value) return "secret header missing";
      if (ep.websocketUrl.includes(h[0].value)) return "the preview token is in the URL";
    },
  },
  onLease("leaseConfig", {
    name: "environmentDestroyLease deletes it with a receipt",
    method: "environmentDestroyLease",
    timeoutMs: (ctx) => sandboxRpc(ctx.state.leaseConfig),
    check: receiptIn("destroyed"),
  }),
  onLease("config", {
    name: "environmentResumeLease of the destroyed sandbox says not resumable",
    method: "environmentResumeLease",
    timeoutMs: 60_000,
    check(lease) {
      return lease?.providerLeaseId === null && lease?.metadata?.expired === true ? undefined : `result ${JSON.stringify(lease)}`;
    },
  }),
  // Interactive setup and templates: start a setup sandbox over SSH, read
  // it, capture it as a snapshot, delete the snapshot, cancel the setup.
  {
    name: "environmentStartInteractiveSetup starts a setup sandbox with the SSH token only in the payload",
    method: "environmentStartInteractiveSetup",
    skip: (ctx) => (ctx.state.config ? undefined : "validate did not pass"),
    params: (ctx) => ({ ...baseParams(ctx), config: ctx.state.config, sessionId: "interop-setup-1", connectionExpiresInMinutes: 30 }),
    timeoutMs: (ctx) => executeRpc(undefined, ctx.state.config),
    check(s, ctx) {
      if (s?.status !== "waiting_for_user" || typeof s.providerLeaseId !== "string") return `session ${JSON.stringify({ ...s, connectionPayload: undefined })}`;
      const token = s.connectionPayload?.token;
      if (typeof token !== "string" || token === "" || !s.connectionPayload.command?.includes(token)) return "no SSH token and command in the payload";
      if (JSON.stringify({ ...s, connectionPayload: null }).includes(token)) return "the SSH token is outside the payload";
      if (s.connectionSummary?.commandRedacted !== true || s.metadata?.connectionRedacted !== true) return "summary or metadata not redacted";
      ctx.state.setup = s;
    },
  },
  onSetup({
    name: "environmentGetInteractiveSetup reports the setup without minting SSH access",
    method: "environmentGetInteractiveSetup",
    params: () => ({}),
    check(s, ctx) {
      if (s?.status !== "waiting_for_user" || s.providerLeaseId !== ctx.state.setup.providerLeaseId) return `session ${JSON.stringify(s)}`;
      if (s.connectionPayload !== null) return "a payload was minted unasked";
    },
  }),
  onSetup({
    name: "environmentCaptureTemplate captures a snapshot under the sanitised label",
    method: "environmentCaptureTemplate",
    params: () => ({ templateLabel: " Interop Template 1 ", timeoutMs: 60_000 }),
    timeoutMs: (ctx) => executeRpc(60_000, ctx.state.config),
    check(t, ctx) {
      if (t?.templateKind !== "snapshot" || t.templateRef !== "interop-template-1") return `template ${JSON.stringify(t)}`;
      ctx.state.templateRef = t.templateRef;
    },
  }),
  {
    name: "environmentDeleteTemplate deletes the snapshot",
    method: "environmentDeleteTemplate",
    skip: (ctx) => (ctx.state.templateRef ? undefined : "no template"),
    params: (ctx) => ({ ...baseParams(ctx), config: ctx.state.config, templateRef: ctx.state.templateRef, templateKind: "snapshot", reason: "interop" }),
    timeoutMs: (ctx) => executeRpc(undefined, ctx.state.config),
    check(r) {
      return r?.deleted === true && r.metadata?.templateRefRedacted === true ? undefined : `result ${JSON.stringify(r)}`;
    },
  },
  onSetup({
    name: "environmentCancelInteractiveSetup deletes the setup sandbox",
    method: "environmentCancelInteractiveSetup",
    params: () => ({ reason: "interop" }),
    check(r, ctx) {
      return r?.status === "cancelled" && r.metadata?.sandboxId === ctx.state.setup.providerLeaseId ? undefined : `result ${JSON.stringify(r)}`;
    },
  }),
  onSetup({
    name: "environmentGetInteractiveSetup of the cancelled setup says missing",
    method: "environmentGetInteractiveSetup",
    params: () => ({}),
    check(s) {
      return s?.status === "missing" ? undefined : `session ${JSON.stringify(s)}`;
    },
  }),
];

// simHostPath maps path p of the lease's emulated sandbox to where
// daytona-sim keeps it on the host: in its Daytona layout the sandbox's
// /home and /tmp live under <dir>/<sandboxId>/ (docs/emulator.md#sandbox-layout);
// on its host layout the two are the same path.
function simHostPath(ctx, p) {
  const dir = ctx.sim?.dir;
  if (!dir || p === dir || p.startsWith(dir + "/")) return p;
  return path.join(dir, ctx.state.lease.providerLeaseId, p);
}
