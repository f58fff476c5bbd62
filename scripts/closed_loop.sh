#!/usr/bin/env bash
# The closed loop on real data: index SciFact with the base model, choose
# the index's hybrid fusion on the train split (eval --choose-fusion), evaluate
# (test split; hybrid by that choice and by RRF), mine hard negatives on the
# train split with the engine as teacher, fine-tune MiniLM on them on the CPU for a bounded budget, re-encode
# the index with the new model (annactl reindex), choose its fusion again
# (a choice holds for one model), evaluate again.
# Usage: scripts/closed_loop.sh [WORK_DIR]   (env STEPS, BATCH, GROUP, EVAL_EVERY bound the budget, SEED seeds mining and training;
# MINE_ARGS adds mine-negatives flags, e.g. MINE_ARGS="--teacher-model bge-small-en-v1.5" (the default teacher is the
# calibrated fusion of BM25 and the model's cosine; MINE_ARGS="--teacher dense" is the cosine alone);
# MODEL is the student, an installed model's NAME or an anna model DIR (default: the default model, all-MiniLM-L6-v2),
# e.g. MODEL=bge-small-en-v1.5 (trained from the weights read out of its ONNX graph, CLS pooling and query instruction kept);
# EXTRA adds already-mined files to the training input, e.g. EXTRA=GEN-mined.jsonl (annactl doc2query's queries mined
# with --require-positive-top 1)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=$ROOT/bin/annactl
DATA=${DATA:-$ROOT/../shared/datasets/scifact}
cleanup_tmp() {
	if [ -d "$tmp/closed-loop/idx" ] && [ -f "$tmp/closed-loop/ft/model/anna-model.json" ]; then
		fp=$("$A" stats --index "$tmp/closed-loop/idx" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["model_fingerprint"][:12])' 2>/dev/null || true)
		home=${ANNA_HOME:-$HOME/.cache/anna}
		if [ -n "$fp" ]; then
			for d in "$home"/models/*-"$fp"; do
				[ -d "$d" ] && rm -rf "$d"
			done
		fi
	fi
	rm -rf "$tmp"
}
if [ -n "${1:-}" ]; then
	W=$1
else
	tmp=$(mktemp -d)
	# reindex keeps the fine-tuned model under $ANNA_HOME/models (NAME-FP12,
	# so that the index outlives its training folder); a throwaway run
	# removes that copy with the rest.
	trap 'cleanup_tmp' EXIT
	W=$tmp/closed-loop
fi
STEPS=${STEPS:-100}
BATCH=${BATCH:-8}
GROUP=${GROUP:-4}
EVAL_EVERY=${EVAL_EVERY:-25}
# SEED seeds mining and training; unset: mining 1, training 42 (the README's runs)
MINE_SEED=${SEED:-1}
TRAIN_SEED=${SEED:-42}
if [ ! -f "$DATA/corpus.jsonl" ]; then
	echo "closed loop: skipped, no SciFact at $DATA (it ships in ../shared beside the repository)"
	exit 0
fi
mkdir -p "$W"
step() { printf '\n== %s (%s)\n' "$*" "$(date -u +%T)"; }

MODEL=${MODEL:-}
MODEL_ARGS=()
[ -n "$MODEL" ] && MODEL_ARGS=(--model "$MODEL")
step "index SciFact with the base model${MODEL:+ ($MODEL)}"
# float32, as the fine-tuned model is: the loop compares the two models, not
# two precisions (int8, index's default, is measured in docs/results/encoder.md)
"$A" index --cache --precision float32 --index "$W/idx" "${MODEL_ARGS[@]}" "$DATA/corpus.jsonl"
# evaluate DIR NAME: choose DIR's fusion on the train split, then evaluate on
# the test split (hybrid by that choice, and by RRF).
evaluate() {
	"$A" eval "$DATA" --split train --index "$1" --choose-fusion --json >"$W/$2-choice.json"
	"$A" eval "$DATA" --split test --index "$1" --modes lexical,dense,hybrid --json | tee "$W/$2.json"
	"$A" eval "$DATA" --split test --index "$1" --modes hybrid --fusion rrf --json | tee "$W/$2-rrf.json"
	"$A" stats --index "$1" --json >"$W/$2-stats.json"
}
step "evaluate the base model (its fusion chosen on the train split; test split)"
evaluate "$W/idx" base

MINE_ARGS=${MINE_ARGS:-}
# The fusion teacher unless MINE_ARGS names one: an installed reranker measured to help would otherwise be the teacher.
case " $MINE_ARGS " in *" --teacher "* | *" --teacher="* | *" --reranker"*) ;; *) MINE_ARGS="--teacher fusion $MINE_ARGS" ;; esac
step "mine hard negatives on the train split (margin 0.95, 7 negatives; ${MINE_ARGS:-fusion teacher})"
# shellcheck disable=SC2086
"$A" mine-negatives --dataset "$DATA" --split train --index "$W/idx" --output "$W/mined.jsonl" --seed "$MINE_SEED" --resume $MINE_ARGS
IN=$W/mined.jsonl
if [ -n "${EXTRA:-}" ]; then
	IN=$W/train.jsonl
	# shellcheck disable=SC2086
	cat "$W/mined.jsonl" $EXTRA >"$IN.tmp" && mv "$IN.tmp" "$IN"
fi
step "fine-tune on the CPU: $STEPS steps x $BATCH queries x (1 + $((GROUP-1)) negatives)${EXTRA:+, with $EXTRA}"
"$A" train "${MODEL_ARGS[@]}" --input "$IN" --output "$W/ft" --steps "$STEPS" --batch-queries "$BATCH" --group "$GROUP" \
	--distill 0.5 --seed "$TRAIN_SEED" --eval-every "$EVAL_EVERY" --checkpoint-every 25 $( [ -d "$W/ft/checkpoint" ] && echo --resume )
step "re-encode the index with the fine-tuned model"
"$A" reindex --index "$W/idx" --model "$W/ft/model"
step "evaluate the fine-tuned model (its fusion chosen on the train split; test split)"
evaluate "$W/idx" finetuned

python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
load = lambda n: json.load(open(f"{w}/{n}.json"))
b, f = load("base"), load("finetuned")
b["hybrid/rrf"], f["hybrid/rrf"] = load("base-rrf")["hybrid"], load("finetuned-rrf")["hybrid"]
fb, ff = load("base-stats")["fusion"], load("finetuned-stats")["fusion"]
print(f"\nhybrid fuses by the index's choice on the train split: base {fb}, fine-tuned {ff}")
print("mode         base nDCG@10  fine-tuned nDCG@10   delta")
worse = False
for m in ("lexical", "dense", "hybrid", "hybrid/rrf"):
    d = f[m]["ndcg@10"] - b[m]["ndcg@10"]
    print(f"{m:12s} {b[m]['ndcg@10']:.4f}        {f[m]['ndcg@10']:.4f}             {d:+.4f}")
    worse |= m == "dense" and d < 0
if worse:
    print("WARNING: the fine-tuned encoder is worse than the base on the held-out split")
PY
