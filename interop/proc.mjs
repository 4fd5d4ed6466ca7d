// Linux /proc helpers shared by the interop test and the start-up benchmark
// (bench/startup.mjs): both need the process a launcher started.

import { readFileSync, readdirSync } from "node:fs";

/** The pids of pid's children, from every thread's children list. */
export const childrenOf = (pid) => {
  const out = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const text = readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").trim();
    if (text) out.push(...text.split(/\s+/).map(Number));
  }
  return out;
};
