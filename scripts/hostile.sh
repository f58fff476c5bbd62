#!/usr/bin/env bash
# The hostile-input suite (issue 59): replays what a hostile or careless
# client sends against a running `annactl serve` of a small index (the
# default model, --timeout 10s): issue 59's findings, malformed and
# oversized bodies, desktop attacks, slow bodies and headers. Each case is
# timed and its peak resident memory taken (VmHWM, reset before it),
# against the server's idle memory after a warm-up; the run fails when a
# case costs more than twice that, runs past its deadline, or a client's
# mistake is answered 5xx. The table goes to FILE (default
# hostile-table.md); docs/results/durability.md holds one.
#
#   bash scripts/hostile.sh [FILE]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=$(realpath -m "${1:-hostile-table.md}")
GO=${GO:-go}
ANNA_HOSTILE_TABLE=$OUT "$GO" test -count=1 -run '^TestHostileServe$' -v -timeout 30m ./cmd/annactl
echo "table: $OUT"
