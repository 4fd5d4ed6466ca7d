// Interop steps for the login terminal and the duplex channel, driven the
// way the host drives them: through the worker handle's openLoginPtySession
// and openDuplexChannel (the real route bookkeeping, pre-bind queues, close
// acknowledgements and the kill-on-violation rules), not through raw calls.
// Each step has run(handle, ctx) instead of params; see steps.mjs.

import { randomBytes, randomUUID } from "node:crypto";
import fs from "node:fs";

/** Resolves once cond() holds, polling the event loop; rejects after ms. */
export async function until(what, cond, ms = 20_000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const leaseInput = (ctx) => ({
  driverKey: "daytona",
  companyId: ctx.ids.companyId,
  environmentId: ctx.ids.environmentId,
  providerLeaseId: ctx.state.lease.providerLeaseId,
});

/**
 * A byte counter whose waits resolve on the data event itself (no polling,
 * so a benchmark measures the channel, not a timer).
 */
export function byteCounter() {
  let received = 0;
  const waiters = new Set();
  return {
    received: () => received,
    add(n) {
      received += n;
      for (const w of waiters) {
        if (received >= w.n) {
          waiters.delete(w);
          clearTimeout(w.timer);
          w.resolve();
        }
      }
    },
    atLeast(n, what, ms) {
      if (received >= n) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const w = { n, resolve };
        w.timer = setTimeout(() => {
          waiters.delete(w);
          reject(new Error(`timed out after ${ms} ms waiting for ${what} (${received} of ${n} bytes)`));
        }, ms);
        waiters.add(w);
      });
    },
  };
}

/** A duplex channel with its received bytes collected. */
export async function openCollecting(handle, ctx, command, { keep = true } = {}) {
  const session = await handle.openDuplexChannel({ ...leaseInput(ctx), command });
  const chunks = [];
  const count = byteCounter();
  session.onData((chunk) => {
    if (keep) chunks.push(Buffer.from(chunk));
    count.add(chunk.byteLength);
  });
  return { session, ...count, bytes: () => Buffer.concat(chunks) };
}

/**
 * Writes payload in pieces of `piece` bytes, keeping at most `window` bytes
 * written but not yet echoed (the host holds at most 384 KiB of unanswered
 * writes per route and ends a route past it; write() itself never waits).
 */
export async function writeEchoed(ch, payload, { piece = 64 << 10, window = 256 << 10, timeoutMs = 60_000 } = {}) {
  const base = ch.received();
  for (let off = 0; off < payload.length; off += piece) {
    const end = Math.min(off + piece, payload.length);
    await ch.atLeast(base + end - window, "the echo window", timeoutMs);
    ch.session.write(payload.subarray(off, end));
  }
  await ch.atLeast(base + payload.length, `${payload.length} bytes echoed`, timeoutMs);
}

const needsLease = (ctx) => (ctx.state.lease ? undefined : "no lease");

export const channelSteps = [
  {
    name: "login PTY: open through the host, the shell's message for a missing CLI, exit 127",
    method: "loginPtyOpen",
    skip: needsLease,
    async run(handle, ctx) {
      const sessionHome = `/tmp/paperclip-adapter-login/${randomUUID()}`;
      try {
        const session = await handle.openLoginPtySession({ ...leaseInput(ctx), loginCommandKey: "claude", sessionHome });
        let out = "";
        session.onData((chunk) => {
          out += chunk;
        });
        // No claude on the emulator's machine: the shell says so and the
        // login ends with the shell's 127 instead of leaving a shell open.
        await until("the launch line's output", () => out.includes("claude"));
        const exit = await Promise.race([session.wait(), new Promise((r) => setTimeout(() => r("no exit"), 20_000))]);
        await session.close();
        return { chars: out.length, notFound: /not found/.test(out), exit };
      } finally {
        fs.rmSync(sessionHome, { recursive: true, force: true });
      }
    },
    check: (v) => (v?.chars > 0 && v.notFound && v.exit?.exitCode === 127 ? undefined : `result ${JSON.stringify(v)}`),
  },
  {
    name: "duplex channel to cat: 1 MiB of random bytes in several writes comes back exactly, in order",
    method: "duplexChannelOpen",
    skip: needsLease,
    async run(handle, ctx) {
      const ch = await openCollecting(handle, ctx, ["cat"]);
      const payload = randomBytes(1 << 20);
      await writeEchoed(ch, payload);
      const got = ch.bytes();
      await ch.session.close();
      if (!got.equals(payload)) return { problem: `received ${got.length} bytes that differ from the ${payload.length} written` };
      return { bytes: got.length };
    },
    check: (v) => v?.problem ?? (v?.bytes === 1 << 20 ? undefined : `result ${JSON.stringify(v)}`),
  },
  {
    name: "duplex channel: a dropped provider transport is reported as transportClosed",
    method: "duplexChannelOpen",
    skip: (ctx) => needsLease(ctx) ?? (ctx.sim ? undefined : "no daytona-sim"),
    async run(handle, ctx) {
      const ch = await openCollecting(handle, ctx, ["cat"]);
      await writeEchoed(ch, Buffer.from("before the drop\n"));
      const res = await fetch(`${ctx.sim.apiUrl}/__sim/pty-drop?sandbox=${encodeURIComponent(ctx.state.lease.providerLeaseId)}`, {
        method: "POST",
        headers: { authorization: `Bearer ${ctx.config.apiKey}` },
      });
      const dropped = (await res.json()).dropped;
      const exit = await Promise.race([ch.session.wait(), new Promise((r) => setTimeout(() => r("no exit"), 20_000))]);
      await ch.session.close();
      return { dropped, exit };
    },
    check(v) {
      if (v?.dropped !== 1) return `dropped ${v?.dropped} connections, want 1`;
      if (v.exit?.exitCode !== null || v.exit?.transportClosed !== true) return `exit ${JSON.stringify(v.exit)}`;
    },
  },
  {
    name: "after every route closed, the worker is alive and healthy",
    method: "health",
    params: () => ({}),
    check(result) {
      return result?.status === "ok" ? undefined : `result ${JSON.stringify(result)}`;
    },
  },
];
