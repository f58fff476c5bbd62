#!/usr/bin/env bash
# The default model chosen by measurement (issue 64): every catalogue
# encoder (all-MiniLM-L6-v2, bge-small-en-v1.5, e5-small-v2), float32 and
# int8 as this build converts them, on every shared retrieval set, as
# annactl eval measures a BEIR folder — nDCG@10 per mode and indexing CPU
# seconds per document — then the table and the choice (the best average
# hybrid nDCG@10 within 2.5x all-MiniLM-L6-v2-int8's CPU per document).
# It is BenchmarkModelChoice, run under nice (hours on a shared 2-core
# machine); each form and set is appended to OUT as it finishes, and a run
# started again skips what OUT holds, so it can be stopped and resumed.
# Usage: scripts/models.sh          measure what OUT lacks, then the tables
#        scripts/models.sh --table  the tables of OUT's rows only (Markdown)
# env: OUT (default docs/results/models.jsonl), EXTRA (NAME=DIR[,NAME=DIR]:
#      more model directories as forms, e.g. an int8 model converted before
#      issue 64), SETS (SET[,SET]: those sets only), FORMS (FORM[,FORM]: those
#      forms only, in that order), NICE (10).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/docs/results/models.jsonl}
eval "$(make -s env)"
export ANNA_MODELS_OUT=$OUT ANNA_MODELS_EXTRA=${EXTRA:-} ANNA_MODELS_SETS=${SETS:-} ANNA_MODELS_FORMS=${FORMS:-}
if [ "${1:-}" = --table ]; then
	ANNA_MODELS_TABLE_ONLY=1 go test ./benchmarks -run '^$' -bench 'ModelChoice' -benchtime 1x -v | sed -n '/^averages over\|^(no set\|^$\|^[|]\|^choice:\|^not \|^measured with/p'
	exit "${PIPESTATUS[0]}"
fi
# the commit measured, recorded in each row (-dirty: with changes not committed)
ANNA_MODELS_BUILD=$(git describe --always --dirty 2>/dev/null || echo unknown)
export ANNA_MODELS_BUILD
echo "models.sh: $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), results to $OUT" >&2
exec nice -n "${NICE:-10}" go test ./benchmarks -run '^$' -bench 'ModelChoice' -benchtime 1x -timeout 0 -v
