#!/usr/bin/env bash
# The official @daytonaio/sdk against the Daytona emulator, for the routes
# of interactive setup, templates and runner ingress (check.mjs): a stage of
# scripts/test.sh. It installs the SDK pinned by package-lock.json (npm ci
# --ignore-scripts, into interop/sdk-access/node_modules, gitignored) and
# builds daytona-sim.
# Uses interop's Node 24 when interop/setup.sh installed it, else `node`.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sdk-access.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$HERE" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
(cd "$ROOT" && CGO_ENABLED=0 go build -o "$tmp/daytona-sim" ./cmd/daytona-sim)
node=node
for arch in x64 arm64; do
  if [ -x "$ROOT/interop/node_modules/node-linux-$arch/bin/node" ]; then node=$ROOT/interop/node_modules/node-linux-$arch/bin/node; fi
done
"$node" "$HERE/check.mjs" "$tmp/daytona-sim"
