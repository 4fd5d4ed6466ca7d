// A loopback HTTP and WebSocket proxy in front of daytona-sim for the
// execute benchmark (bench/execute.mjs). It is the fallback when the sim
// being measured has no -latency flag or no request log (an older build):
//
//   - every request and every WebSocket upgrade is held for latencyMs before
//     it is forwarded, which is one round trip of a real network (the same
//     knob as the sim's -latency; frames after an upgrade pass at once);
//   - every request is logged as the sim's request log does it: method,
//     path, status, whether it arrived on a TCP connection the client had
//     not used before (newConn) and whether it was a WebSocket upgrade.
//
// Control-plane answers (under /api) carry the sandbox's toolboxProxyUrl,
// which names the sim itself; the proxy rewrites the sim's origin to its own
// in those small JSON bodies so toolbox calls come through it too. Toolbox
// answers stream through untouched.

import http from "node:http";
import net from "node:net";

export async function startProxy({ target, latencyMs = 0 }) {
  const up = new URL(target);
  const log = [];
  const seen = new WeakSet();
  const sockets = new Set();
  // Upstream connections are pooled generously: only the client's side of
  // the proxy is what the benchmark counts.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
  const hold = () => (latencyMs > 0 ? new Promise((r) => setTimeout(r, latencyMs)) : Promise.resolve());
  let origin = "";

  const record = (req, webSocket) => {
    const newConn = !seen.has(req.socket);
    seen.add(req.socket);
    const e = { method: req.method, route: req.url.split("?")[0], status: 0, newConn, webSocket };
    log.push(e);
    return e;
  };

  const server = http.createServer(async (req, res) => {
    const e = record(req, false);
    await hold();
    const api = req.url.startsWith("/api/") || req.url === "/api";
    const headers = { ...req.headers };
    if (api) delete headers["accept-encoding"]; // the body is rewritten as text
    const preq = http.request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers, agent }, (pres) => {
      e.status = pres.statusCode;
      if (!api) {
        res.writeHead(pres.statusCode, pres.headers);
        pres.pipe(res);
        return;
      }
      const chunks = [];
      pres.on("data", (c) => chunks.push(c));
      pres.on("end", () => {
        const body = Buffer.from(Buffer.concat(chunks).toString("utf8").replaceAll(up.origin, origin));
        const h = { ...pres.headers, "content-length": String(body.length) };
        delete h["transfer-encoding"];
        res.writeHead(pres.statusCode, h);
        res.end(body);
      });
    });
    preq.on("error", (err) => res.destroy(err));
    req.pipe(preq);
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  server.on("upgrade", async (req, socket, head) => {
    const e = record(req, true);
    await hold();
    const conn = net.connect(Number(up.port), up.hostname, () => {
      let raw = `${req.method} ${req.url} HTTP/1.1\r\n`;
      for (let i = 0; i < req.rawHeaders.length; i += 2) raw += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
      conn.write(`${raw}\r\n`);
      if (head.length) conn.write(head);
      conn.once("data", (d) => {
        const m = /^HTTP\/1\.[01] (\d{3})/.exec(d.toString("latin1", 0, 16));
        if (m) e.status = Number(m[1]);
      });
      conn.pipe(socket);
      socket.pipe(conn);
    });
    const drop = () => {
      conn.destroy();
      socket.destroy();
    };
    conn.on("error", drop);
    socket.on("error", drop);
    conn.on("close", () => socket.destroy());
    socket.on("close", () => conn.destroy());
  });
  // The sim (a Go server) keeps idle connections open; so must the proxy,
  // or its own timeouts would show up as new connections of the worker.
  server.keepAliveTimeout = 10 * 60 * 1000;
  server.headersTimeout = 0;
  server.requestTimeout = 0;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${server.address().port}`;
  return {
    origin,
    // The rewrite of a URL that names the sim, e.g. its apiUrl.
    rewrite: (u) => u.replace(up.origin, origin),
    requests: (since = 0) => log.slice(since),
    close() {
      for (const s of sockets) s.destroy();
      agent.destroy();
      server.close();
    },
  };
}
