#!/usr/bin/env bash
# `make demo`: one full lease lifecycle through the worker binary, step by step
# with timings. Against the built-in Daytona emulator, or real Daytona when
# DAYTONA_API_KEY is set.
set -euo pipefail
cd "$(dirname "$0")/.."
make --no-print-directory build >&2
exec go run ./cmd/daytona-demo -worker bin/daytona-worker -sim bin/daytona-sim "$@"
