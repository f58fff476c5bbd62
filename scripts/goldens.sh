#!/usr/bin/env bash
# Remakes the golden files of the reference tests (`make goldens`): every
# testdata/*.golden that internal/reftest reads, each from its Python tool
# (tools/*.py) run in the venv `make pydeps` installs, over the inputs its
# test writes. The tests read these files, so a checkout without Python runs
# every gradient and forward check; a test whose tool or inputs changed since
# its golden file was made fails as stale until this is run.
#
#   scripts/goldens.sh           remake them all (a file whose outputs are the
#                                same is left as it is)
#   RUN=Anchor scripts/goldens.sh   only the tests matching RUN
#
# Each package that declares a reftest.Suite runs its tests matching RUN with
# ANNA_GOLDENS=update; the script then checks that every golden file in the
# tree was visited (written or found unchanged), so that a test whose name
# RUN misses is not left stale unnoticed.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
RUN=${RUN:-'MatchPyTorch|MatchesTransformers|MatchesGGUFPy'}
pkgs=$(grep -rl --include='*_test.go' 'reftest\.Suite{' . | xargs -n1 dirname | sort -u)
[ -n "$pkgs" ] || { echo "goldens: no package declares a reftest.Suite" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
for p in $pkgs; do
	echo "goldens: $p" >&2
	if ! ANNA_GOLDENS=update $GO test -count=1 -v -run "$RUN" "$p" >"$log.out" 2>&1; then
		grep -v -e '^=== RUN' -e '--- PASS' "$log.out" | tail -40 >&2
		status=1
	fi
	# "testdata/NAME.golden: written, ..." or ": unchanged (...)", relative to the package
	sed -n 's/^ *[A-Za-z0-9_]*_test\.go:[0-9]*: \(testdata\/[^:]*\.golden\): \(written\|unchanged\).*/\1 \2/p' "$log.out" |
		while read -r f what; do echo "${p#./}/$f $what"; done >>"$log"
done
rm -f "$log.out"
sort -u "$log" >&2
missing=$(git ls-files -co --exclude-standard '*.golden' | sort | comm -23 - <(cut -d' ' -f1 "$log" | sort -u))
if [ "$RUN" = 'MatchPyTorch|MatchesTransformers|MatchesGGUFPy' ] && [ -n "$missing" ]; then
	echo "goldens: not remade (no test matching RUN reads them): $missing" >&2
	status=1
fi
exit $status
