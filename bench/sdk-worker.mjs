// Reference worker for the start-up benchmark: the smallest plugin worker
// built with the official SDK (@paperclipai/plugin-sdk 2026.916.1), run the
// same way and measured by the same driver as daytona-worker, so the
// comparison holds on whatever machine and load the benchmark runs on.
// scripts/bench.sh copies it next to interop/node_modules to resolve the SDK.
import { definePlugin, runWorker } from "@paperclipai/plugin-sdk";

const plugin = definePlugin({
  async setup() {},
  async onHealth() {
    return { status: "ok" };
  },
});

runWorker(plugin, import.meta.url);
