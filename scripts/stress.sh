#!/usr/bin/env bash
# The load check of the test suite (docs/development.md): runs
# `go test -race ./...` RUNS times (default 5) while stress-ng keeps CPUS
# workers (default 2) busy, and fails if any run fails. No test may measure
# the machine, so a loaded machine must pass exactly like a quiet one.
# Not part of `make test`: it takes RUNS times as long.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=${RUNS:-5}
cpus=${CPUS:-2}
if ! command -v stress-ng >/dev/null; then
	echo "stress-ng is not installed (Debian: apt-get install -y stress-ng)" >&2
	exit 2
fi

failed=0
for i in $(seq 1 "$runs"); do
	stress-ng --cpu "$cpus" --timeout 30m >/dev/null 2>&1 &
	load=$!
	start=$(date +%s)
	log=$(mktemp)
	if go test -race -count=1 -timeout 20m ./... >"$log" 2>&1; then
		result=pass
	else
		result=FAIL
		failed=$((failed + 1))
		grep -E '^(--- FAIL|FAIL|panic)' "$log" >&2
		echo "run $i: the whole output is kept in $log" >&2
	fi
	kill "$load" 2>/dev/null
	wait "$load" 2>/dev/null
	echo "run $i/$runs: $result in $(($(date +%s) - start)) s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	[ "$result" = FAIL ] || rm -f "$log"
done
echo "stress: $((runs - failed)) passed, $failed failed"
((failed == 0))
