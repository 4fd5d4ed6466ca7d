#!/usr/bin/env bash
# make mutate: mutation testing of the lines changed since BASE, with
# gremlins (installed here by module version, so it works from a fresh
# clone). docs/testing.md says how to read the result.
#
#   BASE            the commit to diff against (default: the last merge
#                   commit, `git log --merges -1`; e.g. BASE=main~3)
#   MUTATE_BUDGET   wall-clock bound of the whole run (default 20m); what
#                   is not tried by then is reported as not tried
#   MUTATE_WORKERS  mutants tested at once (default 1: each test run
#                   already uses both cores of a 2-core machine)
#   MUTATE_DIRS     package directories to mutate (default: every
#                   directory with changed non-test Go files)
#   MUTATE_FLAGS    extra gremlins flags (e.g. --invert-loopctrl)
#
# Per package directory it runs `gremlins unleash` from inside that
# directory, with git's diff.relative on so that gremlins' --diff names
# match the files it walks there, and no diff context: gremlins takes a
# hunk's added lines as one run from its first, so a hunk of two changes
# with a context line between would leave the second one unmutated. Only changed lines are mutated; each
# mutant runs its package's tests (-failfast). It prints every mutant that
# survived (LIVED), was not covered, or timed out, and the score: killed /
# (killed + lived). It is not part of CI.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

gremlins_pkg=github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0
bin=$root/.cache/gremlins-v0.6.0/gremlins # .cache/ is not tracked
if [ ! -x "$bin" ]; then
	echo "== installing $gremlins_pkg"
	GOBIN=$(dirname "$bin") go install "$gremlins_pkg" || exit 1
fi

base=${BASE:-$(git log --merges -1 --format=%H)}
if [ -z "$base" ] || ! git rev-parse --verify -q "$base^{commit}" >/dev/null; then
	echo "mutate: no base commit (set BASE=<commit>)" >&2
	exit 2
fi
budget=${MUTATE_BUDGET:-20m}
workers=${MUTATE_WORKERS:-1}

# The directories with changed production Go files, outermost only:
# gremlins in provider/ also walks provider/config/.
if [ -n "${MUTATE_DIRS:-}" ]; then
	dirs=$MUTATE_DIRS
else
	dirs=$(git diff --merge-base --name-only --diff-filter=AMR "$base" -- '*.go' ':(exclude)*_test.go' ':(exclude)**/testdata/**' |
		xargs -r -n1 dirname | sort -u |
		awk '{ for (i = 1; i <= n; i++) if (index($0 "/", kept[i] "/") == 1 && kept[i] != ".") next; kept[++n] = $0; print }')
fi
echo "== mutate: lines changed since $(git rev-parse --short "$base") ($(git log -1 --format=%s "$base" | cut -c1-60))"
if [ -z "$dirs" ]; then
	echo "== no production Go file changed since the base: nothing to mutate"
	exit 0
fi
echo "== packages: $(echo $dirs)"

to_seconds() {
	case $1 in
	*h) echo $((${1%h} * 3600)) ;;
	*m) echo $((${1%m} * 60)) ;;
	*s) echo "${1%s}" ;;
	*) echo "$1" ;;
	esac
}
start=$(date +%s)
deadline=$((start + $(to_seconds "$budget")))
log=$(mktemp)
trap 'rm -f "$log" "$log.$$"' EXIT

for d in $dirs; do
	left=$((deadline - $(date +%s)))
	if ((left <= 0)); then
		echo "== $d: not tried, the budget ($budget) is spent"
		echo "NOT-TRIED $d" >>"$log"
		continue
	fi
	# gremlins mutates every line when its diff is empty: never let it.
	if [ -z "$(cd "$d" && git diff --merge-base --relative --name-only "$base" -- '*.go' ':(exclude)*_test.go')" ]; then
		echo "== $d: no production Go file changed here since the base; skipped"
		continue
	fi
	excl=()
	if [ "$d" = "." ]; then
		excl=(-E '/') # only the root package's own files
	fi
	echo "== $d (up to ${left}s left)"
	# SIGINT at the deadline: gremlins stops gracefully; the mutants it
	# finished are already printed, one line each.
	(cd "$d" && GOFLAGS="${GOFLAGS:+$GOFLAGS }-count=1" GIT_CONFIG_COUNT=3 GIT_CONFIG_KEY_0=diff.relative GIT_CONFIG_VALUE_0=true \
		GIT_CONFIG_KEY_1=diff.context GIT_CONFIG_VALUE_1=0 GIT_CONFIG_KEY_2=diff.noprefix GIT_CONFIG_VALUE_2=false \
		timeout --signal=INT --kill-after=30s "$left" \
		"$bin" unleash "$root/$d" --diff "$base" --workers "$workers" --timeout-coefficient 3 \
		--output-statuses lctkv "${excl[@]}" ${MUTATE_FLAGS:-}) 2>&1 |
		sed -u "s|\( at \)\([^ ]*\.go:\)|\1$d/\2|; s|$d/\./|$d/|" | tee "$log.$$" | tee -a "$log"
	rc=${PIPESTATUS[0]}
	if ((rc == 124 || rc == 130)); then
		echo "== $d: stopped at the budget; mutants not printed above were not tried"
		echo "NOT-TRIED $d" >>"$log"
	elif ((rc != 0)) || grep -q "^ERROR: " "$log.$$" 2>/dev/null; then
		echo "FAILED $d" >>"$log"
	fi
done

elapsed=$(($(date +%s) - start))
killed=$(grep -c '^ *KILLED ' "$log")
lived=$(grep -c '^ *LIVED ' "$log")
echo
echo "== mutate finished in $((elapsed / 60))m$((elapsed % 60))s"
echo "== survivors (LIVED: the tests pass with this change; see docs/testing.md):"
survivors=$(grep '^ *LIVED ' "$log" | sed 's/^ */   /')
echo "${survivors:-   none}"
if grep -q '^ *\(NOT COVERED\|TIMED OUT\) ' "$log"; then
	echo "== not covered by any test, or timed out:"
	grep '^ *\(NOT COVERED\|TIMED OUT\) ' "$log" | sed 's/^ */   /'
fi
grep '^NOT-TRIED ' "$log" | sed 's/^NOT-TRIED /== not finished within the budget: /'
failed=$(grep '^FAILED ' "$log" | sed 's/^FAILED //')
if [ -n "$failed" ]; then
	echo "== gremlins failed in: $(echo $failed) (see its ERROR above: a test that fails without any"
	echo "   mutant stops the coverage run; fix or rerun it, these packages were not mutated)"
fi
if ((killed + lived > 0)); then
	echo "== score: $killed killed, $lived lived: $((100 * killed / (killed + lived)))% (the bar: docs/testing.md)"
else
	echo "== score: no mutant was tested"
fi
[ -z "$failed" ]
