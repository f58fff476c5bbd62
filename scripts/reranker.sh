#!/usr/bin/env bash
# make reranker: train a cross-encoder reranker here, measure it, install it.
#   1. index the SciFact corpus with the default model (embedding cache on);
#   2. mine SciFact train with the pipeline teacher (BM25 + dense candidates
#      fused by RRF, soft labels from the calibrated fusion of BM25 and the
#      cosine: mine-negatives --teacher fusion), 7 negatives per query, and
#      the same for every MORE set (each indexed on its own);
#   3. fine-tune a cross-encoder from the base model's weights (listwise
#      softmax over 1 + 7 candidates + KL distillation from the teacher's
#      scores), resumable (rerun after Ctrl-C or kill -9);
#   4. evaluate on SciFact test and on Cranfield, CISI and CACM: BM25 and
#      hybrid top-DEPTH, reranked (replacing their order, and fused with
#      their lists by RRF), recording each against its candidates in the
#      model's manifest (eval --record);
#   5. install it as $ANNA_HOME/models/$NAME (annactl models add). Search and
#      mining use it unasked only where those measurements say it helps
#      (annactl models list).
# Usage: scripts/reranker.sh [WORK_DIR]  (default $ANNA_HOME/work/reranker, kept for --resume)
# Environment: BASE (model to start from, default bge-small-en-v1.5, installed if absent; all-MiniLM-L6-v2 for
# the first reranker, NAME=anna-reranker-minilm), NAME (anna-reranker-bge),
# STEPS (120), BATCH (8 queries), GROUP (8 = 1 + 7), MAXLEN (192 tokens per pair), LR (7e-5),
# DISTILL (1), SEED (42), DEPTH (100 candidates reranked), EVALS (more BEIR folders to measure on and
# record, default Cranfield, CISI and CACM from ../shared; EVALS="" for SciFact alone), MORE (more BEIR
# sets to mine and train on, each DIR:SPLIT, e.g. MORE=../shared/datasets/squad2-dev-half:dev; default none),
# MORE_MINE_ARGS (more mine-negatives flags for the MORE sets, e.g. "--require-positive-top 1" for queries written by
# annactl doc2query, MORE=GEN_DIR:generated), INSTALL (1; 0 measures the model and leaves it in WORK_DIR/ce/model).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=$ROOT/bin/annactl
DATA=${DATA:-$ROOT/../shared/datasets/scifact}
HOME_DIR=${ANNA_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/anna}
W=${1:-$HOME_DIR/work/reranker}
BASE=${BASE:-bge-small-en-v1.5}
NAME=${NAME:-anna-reranker-bge}
STEPS=${STEPS:-120}
BATCH=${BATCH:-8}
GROUP=${GROUP:-8}
MAXLEN=${MAXLEN:-192}
LR=${LR:-7e-5}
DISTILL=${DISTILL:-1}
SEED=${SEED:-42}
DEPTH=${DEPTH:-100}
MORE=${MORE:-}
MORE_MINE_ARGS=${MORE_MINE_ARGS:-}
INSTALL=${INSTALL:-1}
EVALS=${EVALS-$ROOT/../shared/datasets/cranfield $ROOT/../shared/datasets/cisi $ROOT/../shared/datasets/cacm}
if [ ! -f "$DATA/corpus.jsonl" ]; then
	echo "reranker: no SciFact at $DATA (it ships in ../shared beside the repository)" >&2
	exit 1
fi
mkdir -p "$W"
step() { printf '\n== %s (%s)\n' "$*" "$(date -u +%T)"; }
t0=$(date +%s)

[ -f "$HOME_DIR/models/$BASE/anna-model.json" ] || "$A" models install "$BASE"
step "index SciFact with the base embedding model"
[ -f "$W/idx.done" ] || { "$A" index --cache --index "$W/idx" "$DATA/corpus.jsonl" && touch "$W/idx.done"; }
step "mine SciFact train with the pipeline teacher"
"$A" mine-negatives --dataset "$DATA" --split train --index "$W/idx" --output "$W/mined.jsonl" --teacher fusion --seed 1 --resume
IN=$W/mined.jsonl
if [ -n "$MORE" ]; then
	IN=$W/train.jsonl
	cp "$W/mined.jsonl" "$IN.tmp"
	for m in $MORE; do
		d=${m%:*} sp=${m##*:} n=$(basename "${m%:*}")
		step "mine $n ($sp) with the pipeline teacher"
		[ -f "$W/idx-$n.done" ] || { "$A" index --cache --index "$W/idx-$n" "$d/corpus.jsonl" && touch "$W/idx-$n.done"; }
		# shellcheck disable=SC2086
		"$A" mine-negatives --dataset "$d" --split "$sp" --index "$W/idx-$n" --output "$W/mined-$n.jsonl" --teacher fusion --seed 1 --resume $MORE_MINE_ARGS
		cat "$W/mined-$n.jsonl" >>"$IN.tmp"
	done
	mv "$IN.tmp" "$IN"
fi
step "train the cross-encoder: $STEPS steps x $BATCH queries x $GROUP candidates, $MAXLEN tokens, listwise + distillation $DISTILL"
"$A" train --model "$BASE" --input "$IN" --output "$W/ce" --objective listwise --distill "$DISTILL" \
	--steps "$STEPS" --batch-queries "$BATCH" --group "$GROUP" --max-length "$MAXLEN" --lr "$LR" --seed "$SEED" \
	--eval-every 40 --checkpoint-every 10 --name "$NAME" $( [ -d "$W/ce/checkpoint" ] && echo --resume )
t1=$(date +%s)
MODES=lexical,hybrid,lexical+rerank,hybrid+rerank,lexical+rerank+rrf,hybrid+rerank+rrf
step "evaluate on SciFact test (top $DEPTH reranked) and record it in the model's manifest"
"$A" eval "$DATA" --split test --index "$W/idx" --reranker "$W/ce/model" --rerank-depth "$DEPTH" --modes "$MODES" --record --json | tee "$W/eval-scifact.json"
for d in $EVALS; do
	n=$(basename "$d")
	step "evaluate on $n (top $DEPTH reranked) and record it"
	"$A" eval "$d" --split test --index "$W/idx-$n" --reranker "$W/ce/model" --rerank-depth "$DEPTH" --modes "$MODES" --record --json | tee "$W/eval-$n.json"
done
if [ "$INSTALL" = 1 ]; then
	step "install as $NAME"
	"$A" models add "$W/ce/model" "$NAME"
	"$A" models list | grep -A1 "^  $NAME "
fi
echo "training $(( (t1 - t0) / 60 )) min (index + mine + train), all $(( ($(date +%s) - t0) / 60 )) min"
