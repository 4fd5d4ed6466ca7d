#!/usr/bin/env bash
# The fidelity tier (docs/emulator.md#the-fidelity-tier): the toolbox
# probes, and the worker's exec and sync tests written for a real daemon.
#
#   make fidelity                            the probes against the emulator (CI runs them too)
#   DAYTONA_DAEMON=/path/to/daemon make fidelity
#                                            starts that toolbox daemon binary in a network
#                                            namespace of its own and runs both against it
#   DAYTONA_DAEMON_URL=http://127.0.0.1:PORT make fidelity
#                                            both against a daemon already serving on loopback
#
# The daemon runs every command as the user that starts it, on this
# machine's filesystem, and listens on every interface (toolbox 2280, SSH
# 22220 accepting any key, terminal 22222, recordings 33333): hence the
# namespace, in which only loopback exists. It needs root (or unprivileged
# user namespaces) for unshare, iproute2 and curl.
set -euo pipefail
cd "$(dirname "$0")/.."

probes=./daytona/daytonatest/fidelity/
# The exec tests that reach the sandbox only through the toolbox API.
# The sync test that does.
sync_tests='TestRoundTripThroughTheToolbox'
exec_tests='TestCommandsGiveWhatBashGives|TestConcurrentCommandsOnOneLease|TestTimedOutOneShotKeepsItsOutput|TestNULBytesOneShot|TestCommandAfterALostSession|TestCommandWhoseShellIsKilled'

if [ -z "${DAYTONA_DAEMON:-}" ]; then
	go test -count=1 -v "$probes"
	if [ -n "${DAYTONA_DAEMON_URL:-}" ]; then
		go test -count=1 -v -run "$exec_tests" ./exec/
		go test -count=1 -v -run "$sync_tests" ./sync/
	fi
	exit 0
fi

[ -x "$DAYTONA_DAEMON" ] || { echo "fidelity: DAYTONA_DAEMON=$DAYTONA_DAEMON is not an executable file" >&2; exit 2; }
for tool in unshare ip curl; do
	command -v "$tool" >/dev/null || { echo "fidelity: $tool is needed (util-linux, iproute2, curl)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Built outside the namespace, where the module proxy can be reached.
go test -c -o "$tmp/probes.test" "$probes"
go test -c -o "$tmp/exec.test" ./exec/
go test -c -o "$tmp/sync.test" ./sync/
mkdir -p "$tmp/home" "$tmp/work"
daemon=$(cd "$(dirname "$DAYTONA_DAEMON")" && pwd)/$(basename "$DAYTONA_DAEMON")

unshare --net --fork bash -euo pipefail -c '
	tmp=$1 daemon=$2 exec_tests=$3 sync_tests=$4
	ip link set lo up
	# The daemon keeps its sessions under $HOME/.daytona and runs commands
	# from its working directory; it refuses to start without a sandbox id.
	(cd "$tmp/work" && exec env -i PATH="$PATH" HOME="$tmp/home" USER="$(id -un)" SHELL=/bin/bash LANG=C.UTF-8 \
		DAYTONA_SANDBOX_ID=fidelity "$daemon" >"$tmp/daemon.log" 2>&1) &
	pid=$!
	trap "kill $pid 2>/dev/null; wait $pid 2>/dev/null || true" EXIT
	for _ in $(seq 1 150); do
		curl -fsS -o /dev/null http://127.0.0.1:2280/version 2>/dev/null && break
		sleep 0.2
	done
	curl -fsS http://127.0.0.1:2280/version || { echo "fidelity: the daemon did not answer; its log:" >&2; tail -20 "$tmp/daemon.log" >&2; exit 1; }
	echo
	export DAYTONA_DAEMON_URL=http://127.0.0.1:2280
	"$tmp/probes.test" -test.count=1 -test.v
	(cd exec && "$tmp/exec.test" -test.count=1 -test.v -test.run "$exec_tests")
	(cd sync && "$tmp/sync.test" -test.count=1 -test.v -test.run "$sync_tests")
' fidelity "$tmp" "$daemon" "$exec_tests" "$sync_tests"
