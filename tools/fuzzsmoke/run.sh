#!/usr/bin/env bash
# Fuzzes every fuzz target of the module briefly (make fuzz-smoke,
# docs/testing.md). Targets are found in the sources: a `func FuzzX(f
# *testing.F)` in a _test.go file runs without being listed.
#
# Go 1.26's fuzz coordinator can end a run whose -fuzztime expired with a
# bare "context deadline exceeded" although no input failed (a race in
# its shutdown, fixed in Go 1.27: golang/go#75804). Such a run wrote no
# failing input, so the target is run once more; any other failure, or a
# second one, fails the smoke run.
set -euo pipefail
go=${GO:-go}
fuzztime=${FUZZTIME:-5s}
minimize=${FUZZMINIMIZETIME:-1s}

targets=$(git grep --untracked -E -o '^func Fuzz[A-Za-z0-9_]*\([A-Za-z0-9_]+ \*testing\.F\)' -- '*_test.go' |
	sed -E 's|^(.*)/[^/]*:func (Fuzz[A-Za-z0-9_]*)\(.*$|\1 \2|' | sort -u)
if [ -z "$targets" ]; then
	echo "fuzz-smoke: no fuzz target found" >&2
	exit 1
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT

# fuzz DIR FN: one run of one target, its output shown and kept in $out.
fuzz() {
	"$go" test -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "./$1" 2>&1 | tee "$out"
	return "${PIPESTATUS[0]}"
}

# shutdown_race: the failed run in $out is the coordinator's race alone.
shutdown_race() {
	grep -q 'context deadline exceeded' "$out" &&
		! grep -q -e 'Failing input written to' -e '^panic:' -e '_test\.go:[0-9]' "$out"
}

while read -r dir fn; do
	echo "fuzz-smoke: $fn ./$dir ($fuzztime)"
	if fuzz "$dir" "$fn"; then
		continue
	fi
	if shutdown_race; then
		echo "fuzz-smoke: $fn ended on the fuzz coordinator's deadline race (no failing input); running it again"
		fuzz "$dir" "$fn" && continue
	fi
	exit 1
done <<<"$targets"
