// A stand-in plugin worker for the host floor of bench/execute.mjs: the
// real host worker manager forks it as it forks the daytona-worker
// launcher, and it answers every environmentExecute with one prepared
// result (the JSON of a real 8 MiB one-shot result, read from the file
// named by FLOOR_RESULT once at start), so a call through it costs the
// host's side of the pipe alone: the request written, one result line of
// that size read by the host's readline and JSON.parse'd, the pending call
// settled. No sandbox, no HTTP, no decoding on this side.
//
// initialize answers ok; shutdown answers and exits; anything else is a
// method-not-found error. stdout carries only protocol lines.

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

const result = readFileSync(process.env.FLOOR_RESULT);

// stdout is a pipe: Node writes it synchronously on Linux, in the order
// of the calls, so the result goes out in three writes without a copy.
const answer = (id, body) => process.stdout.write(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},${body}}\n`);

createInterface({ input: process.stdin }).on("line", (line) => {
  const msg = JSON.parse(line);
  if (msg.id === undefined || msg.id === null) return; // a notification
  switch (msg.method) {
    case "initialize":
      answer(msg.id, `"result":{"ok":true,"supportedMethods":["environmentExecute"]}`);
      break;
    case "environmentExecute":
      process.stdout.write(`{"jsonrpc":"2.0","id":${JSON.stringify(msg.id)},"result":`);
      process.stdout.write(result);
      process.stdout.write("}\n");
      break;
    case "shutdown":
      process.stdout.write(`{"jsonrpc":"2.0","id":${JSON.stringify(msg.id)},"result":{}}\n`, () => process.exit(0));
      break;
    default:
      answer(msg.id, `"error":{"code":-32601,"message":"method not found"}`);
  }
});
