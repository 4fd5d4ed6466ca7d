#!/usr/bin/env bash
# The one test command (README "make test"; .ci/run calls it). Installs what it
# needs: Go modules through the module proxy, staticcheck, and the npm packages
# of the real Paperclip host for the interop test.
#
# Every stage runs even when an earlier one fails: the stages check
# independent things, and a failing unit test must not hide an interop
# failure (or the other way round). Each failure is named at the end and
# the script exits non-zero if any stage failed.
set -uo pipefail
cd "$(dirname "$0")/.."

failed=()
stage() {
	local name=$1
	shift
	echo "== $name"
	if ! "$@"; then
		echo "== $name: FAILED" >&2
		failed+=("$name")
	fi
}

stage "go vet" go vet ./...
stage "staticcheck" go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
stage "go test -race" go test -race -count=1 -timeout 20m ./...
stage "interop with the real Paperclip host" bash interop/run.sh

if ((${#failed[@]})); then
	echo "== FAILED stages:" >&2
	printf '   %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "== all stages passed"
