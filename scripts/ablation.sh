#!/usr/bin/env bash
# The papers' techniques on one decoder, side by side (issue #15): every row
# trains SmolLM2-135M-Instruct with LoRA r64/alpha 32 on the same data (hard
# negatives mined on SciFact train by the engine, plus SNLI dev as similarity
# premises with their entailment and contradiction), the same step budget and seed, exports an anna model, and is
# evaluated the same way; the table goes to WORK/ablation.md.
#
# Usage: scripts/ablation.sh [WORK_DIR]
#   STEPS       optimizer steps per row (default 20; two-stage techniques split them)
#   BATCH GROUP queries per step, documents per query (default 4, 4: 1 positive + 3 negatives)
#   MAXLEN      tokens per training text (default 64)
#   SEEDS       seeds of the "contrastive + EOS" row (default "1 2 3"); the other rows use the first
#   EVALS       evaluations, a subset of "stsb sick snli scifact cranfield cisi cacm" (default all);
#               retrieval is dense nDCG@10 with documents cut at EVAL_MAXLEN tokens (default 128: every
#               row's model, the zero-shot import and each run's export, is served at that length)
#   ROWS        rows to run (default all: zeroshot contrastive mean multilayer bidirectional causal2vec
#               causal2vectuned anchor autoregembed; causal2vectuned trains the context encoder with LoRA r16)
#   NLI_PAIRS   SNLI dev premises added to the training data, each with its entailment as the positive and
#               its contradiction as a hard negative (default 2000)
#   DEVICE      cpu (default) or cuda: where the rows train (`annactl train --device`; every row runs on
#               either); the evaluations run on the CPU
# Each finished row leaves WORK/ROW[-seed]/done, so a rerun (after Ctrl-C or a
# crash) skips it; training itself resumes from its checkpoint.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=$ROOT/bin/annactl
SHARED=${SHARED:-$ROOT/../shared/datasets}
W=${1:-$ROOT/ablation}
STEPS=${STEPS:-20}
BATCH=${BATCH:-4}
GROUP=${GROUP:-4}
MAXLEN=${MAXLEN:-64}
SEEDS=${SEEDS:-1 2 3}
EVALS=${EVALS:-stsb sick snli scifact cranfield cisi cacm}
EVAL_MAXLEN=${EVAL_MAXLEN:-128}
ROWS=${ROWS:-zeroshot contrastive mean multilayer bidirectional causal2vec causal2vectuned anchor autoregembed}
NLI_PAIRS=${NLI_PAIRS:-2000}
SEED1=${SEEDS%% *}
mkdir -p "$W"
step() { printf '\n== %s (%s)\n' "$*" "$(date -u +%T)" >&2; }
# shellcheck source=scripts/ablation-rows.sh
. "$ROOT/scripts/ablation-rows.sh"

# SmolLM2's GGUF file and the training data (scripts/decoder-data.sh).
GGUF=$W/SmolLM2-135M-Instruct.Q4_1.gguf
NLI_PAIRS=$NLI_PAIRS SHARED=$SHARED bash "$ROOT/scripts/decoder-data.sh" "$W"

# The rows' training (scripts/ablation-rows.sh's train_row): into WORK.
RUNS=$W DATA=$W/data.jsonl RANK=64 CKPT_EVERY=5 DEVICE=${DEVICE:-cpu} TRAIN_FLAGS=""

# evaluate ROW-DIR MODEL: one JSON line per evaluation into ROW-DIR/evals.jsonl;
# an evaluation already there is not run again (a later run can add columns).
evaluate() {
	local dir=$1 model=$2 e v
	touch "$dir/evals.jsonl"
	for e in $EVALS; do
		grep -q "\"eval\": \"$e\"" "$dir/evals.jsonl" && continue
		step "evaluate $(basename "$dir"): $e"
		v=$(eval_value "$e" "$model") # an assignment: a failed evaluation stops the script
		echo "{\"eval\": \"$e\", \"value\": $v}" >> "$dir/evals.jsonl"
	done
}

for row in $ROWS; do
	case $row in
	zeroshot)
		d=$W/zeroshot-0
		mkdir -p "$d"
		[ -f "$d/model/anna-model.json" ] || "$A" models import --max-length "$EVAL_MAXLEN" "$GGUF" "$d/model"
		echo 0 > "$d/seconds"
		;;
	contrastive)
		for s in $SEEDS; do train_row contrastive "$s" >/dev/null; done ;;
	*) train_row "$row" "$SEED1" >/dev/null ;;
	esac
done
# The rows asked for, evaluated (ROWS and EVALS choose the cells to fill).
for row in $ROWS; do
	for d in "$W/$row"-*/; do
		d=${d%/}
		[ -f "$d/model/anna-model.json" ] && evaluate "$d" "$d/model"
	done
done

python3 - "$W" "$STEPS" "$BATCH" "$GROUP" "$MAXLEN" <<'PY' | tee "$W/ablation.md"
import json, os, statistics, sys
w, steps, batch, group, maxlen = sys.argv[1:6]
names = {"zeroshot": "zero-shot EOS", "contrastive": "contrastive + EOS", "mean": "+ mean pooling",
         "multilayer": "+ multi-layer trainable pooling", "bidirectional": "+ bidirectional attention",
         "causal2vec": "Causal2Vec", "causal2vectuned": "Causal2Vec, context encoder LoRA-tuned", "anchor": "Anchor (stage I + II)", "autoregembed": "AutoRegEmbed (compress + align)"}
rows = {}
for d in sorted(os.listdir(w)):
    p = os.path.join(w, d)
    if not os.path.isfile(os.path.join(p, "evals.jsonl")):
        continue
    row, seed = d.rsplit("-", 1)
    ev = {}
    for line in open(os.path.join(p, "evals.jsonl")):
        r = json.loads(line)
        ev[r["eval"]] = r["value"]
    secs = int(open(os.path.join(p, "seconds")).read())
    for stage in ("anchor1", "autoregembed1"):  # a two-stage row's time includes its first stage
        if row == stage[:-1] and os.path.isfile(os.path.join(w, f"{stage}-{seed}", "seconds")):
            secs += int(open(os.path.join(w, f"{stage}-{seed}", "seconds")).read())
    rows.setdefault(row, []).append((seed, ev, secs))
evals = sorted({e for rs in rows.values() for _, ev, _ in rs for e in ev})
def mean(row, e):
    v = [ev[e] for _, ev, _ in rows.get(row, []) if e in ev]
    return (statistics.mean(v), statistics.pstdev(v) if len(v) > 1 else None) if v else (None, None)
print(f"SmolLM2-135M-Instruct, LoRA r64/α32, {steps} steps × {batch} queries × {group} documents, {maxlen} tokens; same data and seed\n")
# The Δ column averages the evaluations every row shown has (a column
# filled for some rows only does not tilt it).
common = [e for e in evals if all(mean(r, e)[0] is not None for r in rows)]
print("| row | " + " | ".join(evals) + " | training s | Δ vs contrastive + EOS (mean over " + (", ".join(common) or "no common evaluation") + ") |")
print("|---|" + "---|" * (len(evals) + 2))
for row in names:
    if row not in rows:
        continue
    cells = []
    for e in evals:
        m, sd = mean(row, e)
        cells.append("" if m is None else (f"{m:.4f} ± {sd:.4f}" if sd is not None else f"{m:.4f}"))
    base = [mean("contrastive", e)[0] for e in common]
    mine = [mean(row, e)[0] for e in common]
    pairs = [(a, b) for a, b in zip(mine, base) if a is not None and b is not None]
    delta = f"{statistics.mean(a - b for a, b in pairs):+.4f}" if pairs and row != "contrastive" else ""
    secs = statistics.mean(s for _, _, s in rows[row])
    print(f"| {names[row]} | " + " | ".join(cells) + f" | {secs:.0f} | {delta} |")
PY
