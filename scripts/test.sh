#!/usr/bin/env bash
# The one test command (README "make test"; .ci/run calls it). Installs what it
# needs: Go modules through the module proxy, staticcheck, deadcode, and the npm
# packages of the real Paperclip host for the interop test and the official
# Daytona SDK for the emulator check.
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

# deadcode lists the functions no command (cmd/...) can reach; tests do not
# count as users, so code kept alive only by its tests shows up too. It
# exits 0 whatever it finds: any line it prints fails the stage.
deadcode() {
	local out
	out=$(go run golang.org/x/tools/cmd/deadcode@v0.52.0 ./cmd/...) || return 1
	if [ -n "$out" ]; then
		printf '%s\n' "$out"
		echo "deadcode: no command reaches the functions above; delete them" >&2
		return 1
	fi
}

# A few tests are too slow for the race detector and skip themselves under
# it (raceEnabled); this stage runs them without it. Each must be seen
# passing, so a renamed one cannot drop out; the root package's
# TestRaceSkippedTestsRunWithoutRace checks that every test that skips
# under race is listed here.
norace_tests=(TestExecuteOutputKeeps16MiCharacters TestDefaultFrameLimitIs128MiB TestSparse2GiBFileRoundTrip)
norace() {
	local out t rc
	out=$(go test -count=1 -v -timeout 20m -run "^($(
		IFS='|'
		echo "${norace_tests[*]}"
	))\$" ./...)
	rc=$?
	for t in "${norace_tests[@]}"; do
		if ! grep -q -- "--- PASS: $t " <<<"$out"; then
			printf '%s\n' "$out" | grep -Ev '^(=== |ok |\?)'
			echo "$t did not pass" >&2
			return 1
		fi
	done
	return "$rc"
}

stage "go vet" go vet ./...
stage "staticcheck" go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
stage "deadcode" deadcode
# go test includes the root package's code rules: import aliases, at most
# 600 lines a production file, one-paragraph package docs, and no citation
# of documents outside the repository (lint_test.go, pkgdoc_test.go,
# standalone_test.go).
# The fault schedules (chaos/) run 200 schedules in CI, seeded from the
# commit so a failure replays: the test prints each failing seed's command.
CHAOS_SEED=$(( 16#$(git rev-parse --short=12 HEAD 2>/dev/null || echo 1) ))
export CHAOS_SEED CHAOS_N=${CHAOS_N:-200}
echo "== fault schedules: CHAOS_N=$CHAOS_N CHAOS_SEED=$CHAOS_SEED"
stage "go test -race" go test -race -count=1 -timeout 20m ./...
stage "go test without -race: ${norace_tests[*]}" norace
stage "interop with the real Paperclip host" bash interop/run.sh
stage "the official Daytona SDK against the emulator" bash interop/sdk-access/run.sh

if ((${#failed[@]})); then
	echo "== FAILED stages:" >&2
	printf '   %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "== all stages passed"
