#!/usr/bin/env bash
# The one test command (README "make test"; .ci/run calls it). Installs what it
# needs: Go modules through the module proxy, staticcheck, and the npm packages
# of the real Paperclip host for the interop test.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== go vet"
go vet ./...
echo "== staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
echo "== go test -race"
go test -race -count=1 -timeout 20m ./...
echo "== interop with the real Paperclip host"
bash interop/run.sh
