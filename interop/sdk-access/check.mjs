// Drives the Daytona emulator (cmd/daytona-sim, path in argv[2]) with the
// official @daytonaio/sdk through the calls the interactive setup, template
// and runner-ingress methods rely on: SSH access (create, revoke), the
// preview link of the runner port, a snapshot of a sandbox, and the
// snapshot's read and deletion. Prints one line per check; exits non-zero
// on any failure. Every connection stays on 127.0.0.1.
import { spawn } from "node:child_process";
import readline from "node:readline";
import { Daytona } from "@daytonaio/sdk";

const sim = spawn(process.argv[2], [], { stdio: ["pipe", "pipe", "inherit"] });
const first = await new Promise((resolve) => readline.createInterface({ input: sim.stdout }).once("line", resolve));
const { apiUrl, apiKey } = JSON.parse(first);
let failed = 0;
const check = (name, problem) => {
  if (problem) failed++;
  console.log(`${problem ? "FAIL" : "PASS"} [sdk] ${name}${problem ? `: ${problem}` : ""}`);
};

try {
  const daytona = new Daytona({ apiKey, apiUrl, target: "us" });
  const sb = await daytona.create({ snapshot: "base" }, { timeout: 60 });
  check("create a sandbox", sb.state === "started" ? undefined : `state ${sb.state}`);

  const ssh = await sb.createSshAccess(15);
  const minutes = (Date.parse(ssh.expiresAt) - Date.parse(ssh.createdAt)) / 60_000;
  check("createSshAccess(15)", ssh.token && ssh.sshCommand.includes(ssh.token) && minutes === 15 ? undefined : `access ${ssh.id}, ${minutes} min`);
  await sb.revokeSshAccess(ssh.token);
  check("revokeSshAccess", undefined);

  const pv = await sb.getPreviewLink(43127);
  const u = new URL(pv.url);
  check("getPreviewLink(43127): https, token apart", u.protocol === "https:" && u.hostname.startsWith(`43127-${sb.id}`) && pv.token && !pv.url.includes(pv.token)
    ? undefined : `url ${pv.url}`);

  await sb._experimental_createSnapshot("sdk-access-snapshot", 60);
  check("_experimental_createSnapshot waits out snapshotting", sb.state === "started" ? undefined : `sandbox ${sb.state}`);
  const snap = await daytona.snapshot.get("sdk-access-snapshot");
  check("snapshot.get by name", snap.name === "sdk-access-snapshot" && snap.state === "active" ? undefined : `snapshot ${snap.name} ${snap.state}`);
  await daytona.snapshot.delete(snap);
  let gone;
  try {
    await daytona.snapshot.get("sdk-access-snapshot");
  } catch (err) {
    gone = err;
  }
  check("snapshot.delete, then get is DaytonaNotFoundError", gone?.constructor?.name === "DaytonaNotFoundError" ? undefined : `${gone}`);
  await sb.delete(60);
  check("delete the sandbox", undefined);
} catch (err) {
  check("unexpected error", err?.stack ?? String(err));
} finally {
  sim.kill("SIGTERM");
}
console.log(`sdk: ${failed === 0 ? "all passed" : `${failed} failed`}`);
process.exitCode = failed === 0 ? 0 : 1;
