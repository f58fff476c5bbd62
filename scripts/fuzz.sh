#!/usr/bin/env bash
# Runs every fuzz target for a bounded time, one at a time (go test allows
# one -fuzz target per invocation). Each target's committed seed corpus is
# under <package>/testdata/fuzz/<Target>/; a failing input is written there
# too, so `go test ./<package>` replays it from then on.
#
#   FUZZTIME          time per target (default 20s; any -fuzztime value)
#   FUZZMINIMIZETIME  time spent minimising an input (default 5s: go's own
#                     60s default can eat a short run's whole budget)
#   FUZZ              only the targets whose name matches this regexp
#   FUZZBRIEF         time for the targets marked "brief" below, when set
#                     (make test: a few seconds each, so that a target per
#                     parser costs the suite little; make fuzz: FUZZTIME)
#
# Exits non-zero when any target fails; prints each target's execs/s.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
FUZZTIME=${FUZZTIME:-20s}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}
GO=${GO:-go}

targets=(
	"./format/beir FuzzReadCorpus"
	"./format/beir FuzzReadQrels"
	"./filter FuzzParse"
	"./mining FuzzPairs"
	"./internal/model/safetensors FuzzRead"
	"./internal/model/gguf FuzzOpen"
	"./internal/tokenizer FuzzEncode"
	"./format/files FuzzPDF"
	"./format/files FuzzHTML"
	"./format/files FuzzOffice"
	"./format/files FuzzNotebook"
	"./format/files FuzzMail"
	"./format/files FuzzText"
	"./format/files FuzzCode"
	"./server FuzzDialects"
	"./server FuzzMCP"
	# Issue 59: a target for every parser of outside input.
	"./server FuzzHandlers"
	"./cmd/annactl FuzzParseWhere brief"
	"./internal/model/onnxfile FuzzRead brief"
	"./internal/index/dense/hnsw FuzzImport brief"
	"./internal/index/dense FuzzLoad brief"
	"./internal/storage FuzzRecords brief"
	"./internal/storage FuzzSalvage brief"
	"./internal/tokenizer FuzzLoad brief"
	"./model FuzzParseConfig brief"
	"./model FuzzLoadManifest brief"
	"./engine FuzzShareProtocol brief"
	"./internal/format/flagembedding FuzzRead brief"
	"./eval FuzzReadTREC brief"
	"./eval FuzzReadPairs brief"
)

failed=()
summary=()
for t in "${targets[@]}"; do
	read -r pkg name brief <<<"$t"
	if [[ -n "${FUZZ:-}" && ! "$name" =~ $FUZZ ]]; then
		continue
	fi
	time=$FUZZTIME
	if [[ -n "$brief" && -n "${FUZZBRIEF:-}" ]]; then
		time=$FUZZBRIEF
	fi
	echo "== $name ($pkg, $time)"
	log=$(mktemp)
	corpus="${pkg#./}/testdata/fuzz/$name"
	before=$(ls "$corpus" 2>/dev/null | wc -l)
	"$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$time" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	# Go's fuzz coordinator can fail a target with a bare "context deadline
	# exceeded" at the -fuzztime boundary when a worker is mid-call (a race
	# in internal/fuzz, golang/go#75804, fixed in Go 1.27; more likely on a
	# loaded 2-core machine). That is no failing input: none is written. A
	# failure that wrote an input, or printed anything else, still fails.
	flake=
	after=$(ls "$corpus" 2>/dev/null | wc -l)
	# What the failure says: the lines between "--- FAIL:" and "FAIL".
	said=$(awk '/^--- FAIL:/{on=1; next} /^FAIL$/{on=0} on' "$log")
	if [[ $rc -ne 0 && $after -eq $before && "$said" == "    context deadline exceeded" ]]; then
		rc=0
		flake=" (the fuzz coordinator's deadline race at the end, golang/go#75804: no failing input)"
	fi
	# The last progress line: "fuzz: elapsed: 1m30s, execs: 12345 (617/sec), ..."
	last=$(grep -oE 'elapsed: ([0-9]+h)?([0-9]+m)?[0-9]+s, execs: [0-9]+' "$log" | tail -1)
	rm -f "$log"
	secs= execs=
	if [[ $last =~ elapsed:\ (([0-9]+)h)?(([0-9]+)m)?([0-9]+)s,\ execs:\ ([0-9]+) ]]; then
		secs=$((${BASH_REMATCH[2]:-0} * 3600 + ${BASH_REMATCH[4]:-0} * 60 + ${BASH_REMATCH[5]}))
		execs=${BASH_REMATCH[6]}
	fi
	rate=n/a
	if [[ -n "$execs" && -n "$secs" && $secs -gt 0 ]]; then
		rate=$((execs / secs))
	fi
	if [[ $rc -ne 0 ]]; then
		failed+=("$name")
		summary+=("$name: FAILED ($pkg)")
	else
		summary+=("$name ($pkg): ok, ${execs:-0} execs in ${secs:-?}s of fuzzing (~${rate}/s)$flake")
	fi
done

echo
echo "== fuzz summary ($FUZZTIME each${FUZZBRIEF:+, $FUZZBRIEF for the brief ones})"
printf '%s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
	echo "failed: ${failed[*]} (the failing inputs are under <package>/testdata/fuzz/<Target>/)" >&2
	exit 1
fi
