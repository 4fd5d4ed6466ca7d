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
//               does; the chunks land in ctx.logChunks (reset per step)
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

import { HOST_TO_WORKER_OPTIONAL_METHODS, HOST_TO_WORKER_REQUIRED_METHODS } from "@paperclipai/plugin-sdk";

/** Fixtures started before the worker, stopped (in reverse order) after it. */
export const fixtures = [];

const LIFECYCLE_METHODS = ["initialize", "health", "shutdown", "configChanged"];
const KNOWN_METHODS = new Set([...HOST_TO_WORKER_REQUIRED_METHODS, ...HOST_TO_WORKER_OPTIONAL_METHODS]);

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
];
