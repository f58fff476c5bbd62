#!/usr/bin/env bash
# annactl adapt aimed at hybrid retrieval, measured on the four shared English
# collections (SciFact, Cranfield, CISI, CACM) with zero of their judgments used
# for training: each corpus indexed with all-MiniLM-L6-v2 (float32, as adapt.md's
# runs), evaluated (BM25, dense, hybrid as served and by rrf, minmax and dbsf), adapted on a
# copy of that index with extractive pseudo-queries, the teacher of every
# installed catalogue model (--teacher-model auto) and the fusion stage, then
# evaluated again: hybrid as the adapted index fuses (its recorded choice) and
# by each fusion. Every step is skipped when its output exists, and adapt
# resumes from its work folder: run the same command again after a stop.
# Usage: scripts/adapt-hybrid.sh OUT_DIR
# env: SETS (default "cranfield cisi cacm scifact"), DATA (the datasets folder,
#      default ../shared/datasets), NAME (the variant's name, default all),
#      ADAPT_ARGS (more annactl adapt flags, e.g. "--negatives-from lexical"),
#      STEPS (per set: "cranfield=60 cisi=60 cacm=60 scifact=120" by default),
#      INDEX_ARGS (the base index's model flags, default "--precision float32
#      --model all-MiniLM-L6-v2"; "--model all-MiniLM-L6-v2-int8" for the default
#      model), ANNACTL (default bin/annactl).
# The ensemble (adapt --serve ensemble):
#   INDEX_ARGS="--model all-MiniLM-L6-v2-int8" NAME=ensemble ADAPT_ARGS="--serve ensemble" scripts/adapt-hybrid.sh OUT
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=${ANNACTL:-$ROOT/bin/annactl}
DATA=${DATA:-$ROOT/../shared/datasets}
SETS=${SETS:-cranfield cisi cacm scifact}
NAME=${NAME:-all}
STEPS=${STEPS:-cranfield=60 cisi=60 cacm=60 scifact=120}
INDEX_ARGS=${INDEX_ARGS:---precision float32 --model all-MiniLM-L6-v2}
OUT=${1:?usage: scripts/adapt-hybrid.sh OUT_DIR}
mkdir -p "$OUT"
step() { printf '\n== %s (%s)\n' "$*" "$(date -u +%T)"; }
split_of() { if [ -f "$DATA/$1/qrels/test.tsv" ]; then echo test; else echo dev; fi; } # squad2-dev-half: dev
steps_of() { for kv in $STEPS; do [ "${kv%%=*}" = "$1" ] && { echo "${kv#*=}"; return; }; done; echo 60; }

for set in $SETS; do
	W=$OUT/$set
	mkdir -p "$W"
	if [ ! -f "$W/idx.done" ]; then
		step "$set: index ($INDEX_ARGS)"
		# shellcheck disable=SC2086
		"$A" index --cache $INDEX_ARGS --index "$W/idx" "$DATA/$set/corpus.jsonl"
		touch "$W/idx.done"
	fi
	if [ ! -s "$W/before.json" ]; then
		step "$set: evaluate the base (its own fusion: the default)"
		"$A" eval "$DATA/$set" --split "$(split_of "$set")" --index "$W/idx" --modes lexical,dense,hybrid --json >"$W/before.json.tmp"
		mv "$W/before.json.tmp" "$W/before.json"
	fi
	for f in rrf minmax dbsf; do
		if [ ! -s "$W/before-$f.json" ]; then
			step "$set: evaluate the base, hybrid by $f"
			"$A" eval "$DATA/$set" --split "$(split_of "$set")" --index "$W/idx" --modes lexical,dense,hybrid --fusion "$f" --json >"$W/before-$f.json.tmp"
			mv "$W/before-$f.json.tmp" "$W/before-$f.json"
		fi
	done
	V=$W/$NAME
	mkdir -p "$V"
	if [ ! -f "$V/idx.copied" ]; then
		rm -rf "$V/idx"
		cp -a "$W/idx" "$V/idx"
		rm -f "$V/idx/anna.sock"
		touch "$V/idx.copied"
	fi
	if [ ! -f "$V/adapt.done" ]; then
		step "$set: adapt ($NAME: ${ADAPT_ARGS:-})"
		# shellcheck disable=SC2086
		if "$A" adapt --index "$V/idx" --work "$V/work" --steps "$(steps_of "$set")" --batch 8 --seed 42 --teacher-model auto ${ADAPT_ARGS:-} >"$V/adapt.out" 2>"$V/adapt.err"; then
			echo accepted >"$V/adapt.done"
		else
			rc=$?
			grep -q "scored worse" "$V/adapt.err" || { cat "$V/adapt.err" >&2; exit $rc; }
			echo refused >"$V/adapt.done"
		fi
		cat "$V/adapt.out"
	fi
	if [ ! -s "$V/after.json" ]; then
		step "$set: evaluate the adapted index (its own fusion)"
		"$A" eval "$DATA/$set" --split "$(split_of "$set")" --index "$V/idx" --modes lexical,dense,hybrid --json >"$V/after.json.tmp"
		mv "$V/after.json.tmp" "$V/after.json"
	fi
	for f in rrf minmax dbsf; do
		if [ ! -s "$V/after-$f.json" ]; then
			step "$set: evaluate the adapted index, hybrid by $f"
			"$A" eval "$DATA/$set" --split "$(split_of "$set")" --index "$V/idx" --modes hybrid --fusion "$f" --json >"$V/after-$f.json.tmp"
			mv "$V/after-$f.json.tmp" "$V/after-$f.json"
		fi
	done
done

step "summary ($NAME)"
python3 - "$OUT" "$NAME" $SETS <<'PY'
import json, sys, os
out, name, sets = sys.argv[1], sys.argv[2], sys.argv[3:]
def nd(path, mode):
    return json.load(open(path))[mode]["ndcg@10"]
print("| set | check | fusion chosen | dense before → after | hybrid as served, before → after | Δ hybrid | Δ by rrf / minmax / dbsf |")
print("|---|---|---|---|---|---|---|")
deltas = []
for s in sets:
    w, v = f"{out}/{s}", f"{out}/{s}/{name}"
    if not os.path.exists(f"{v}/after.json"):
        print(f"| {s} | (not run yet) | | | | | |"); continue
    verdict = open(f"{v}/adapt.done").read().strip()
    fus = "as before"
    try:
        st = json.load(open(f"{v}/work/adapt.json"))
        fus = st.get("Report", {}).get("Fusion") or "as before"
    except Exception:
        pass
    # Both sides as an index serves them: each with its own fusion (the
    # base's is the default), so the Δ is what a user of the index sees.
    hb, ha = nd(f"{w}/before.json", "hybrid"), nd(f"{v}/after.json", "hybrid")
    deltas.append(ha - hb)
    by = " / ".join(f"{nd(f'{v}/after-{f}.json', 'hybrid') - nd(f'{w}/before-{f}.json', 'hybrid'):+.4f}" for f in ("rrf", "minmax", "dbsf"))
    print(f"| {s} | {verdict} | {fus} | {nd(f'{w}/before.json', 'dense'):.4f} → {nd(f'{v}/after.json', 'dense'):.4f} | {hb:.4f} → {ha:.4f} | {ha - hb:+.4f} | {by} |")
if deltas:
    print(f"\nmean Δ hybrid over {len(deltas)}: {sum(deltas) / len(deltas):+.4f}; worst {min(deltas):+.4f}")
PY
