// Fixtures for the interop harness (see steps.mjs for the fixture shape).

import { spawn } from "node:child_process";

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]"]);

/**
 * The Daytona emulator (cmd/daytona-sim) on loopback. start() spawns it with
 * a stdin pipe and -stop-on-eof (it stops when that pipe closes), reads its one JSON line and
 * puts the environment config a host would pass into ctx.config:
 * { apiUrl, apiKey, timeoutMs }. The API key is a throwaway test key, and
 * still never printed. latency (Go duration syntax, e.g. "40ms") is passed
 * as -rtt: every connection pays that round trip per exchange, a new one a
 * TCP handshake more, WebSocket frames included (plain HTTP: the worker
 * here is given only the host's env, so no SSL_CERT_FILE for -tls).
 */
export function daytonaSim(binary, { timeoutMs = 60_000, startupMs = 15_000, latency } = {}) {
  let child = null;
  let exited = null;
  return {
    name: "daytona-sim",
    async start(ctx) {
      // The latency run is the faithful one: a network's round trips and
      // the real daemon's labeler cost (docs/emulator.md#labeler-cost).
      const faithful = latency ? ["-rtt", latency, "-daemon-cost"] : [];
      child = spawn(binary, ["-stop-on-eof", ...faithful], { stdio: ["pipe", "pipe", "pipe"], env: { PATH: process.env.PATH ?? "" } });
      exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
      let stderr = "";
      child.stderr.setEncoding("utf8");
      child.stderr.on("data", (d) => {
        stderr = (stderr + d).slice(-4000);
      });
      child.stdout.setEncoding("utf8");
      let out = "";
      const ready = await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ready line within ${startupMs} ms; stderr: ${stderr}`)), startupMs);
        child.stdout.on("data", (d) => {
          out += d;
          const nl = out.indexOf("\n");
          if (nl >= 0) {
            clearTimeout(timer);
            try {
              resolve(JSON.parse(out.slice(0, nl)));
            } catch (err) {
              reject(new Error(`ready line is not JSON: ${err.message}`));
            }
          }
        });
        exited.then((e) => {
          clearTimeout(timer);
          reject(new Error(`exited before its ready line (code=${e.code}, signal=${e.signal}); stderr: ${stderr}`));
        });
      });
      const url = new URL(ready.apiUrl);
      if (!LOOPBACK_HOSTS.has(url.hostname)) throw new Error(`apiUrl host ${url.hostname} is not loopback`);
      if (typeof ready.apiKey !== "string" || ready.apiKey === "") throw new Error("ready line has no apiKey");
      ctx.sim = { apiUrl: ready.apiUrl, toolboxProxyUrl: ready.toolboxProxyUrl, dir: ready.dir };
      ctx.config = { ...ctx.config, apiUrl: ready.apiUrl, apiKey: ready.apiKey, timeoutMs };
    },
    async stop() {
      if (!child) return;
      child.stdin.end();
      let timer;
      const e = await Promise.race([
        exited,
        new Promise((resolve) => {
          timer = setTimeout(() => {
            child.kill("SIGKILL");
            resolve({ code: null, signal: "SIGKILL (still running 10 s after its stdin closed)" });
          }, 10_000);
        }),
      ]);
      clearTimeout(timer);
      if (e.code !== 0) throw new Error(`exit code=${e.code} signal=${e.signal} after its stdin closed`);
    },
  };
}
