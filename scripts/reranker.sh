#!/usr/bin/env bash
# make reranker: train a cross-encoder reranker here, measure it, install it.
# The recipe is `annactl rerankers build` (package train/recipe); this script
# gives it the repository's settings:
#   1. index the SciFact corpus with the default model (embedding cache on);
#   2. mine SciFact train with the pipeline teacher (BM25 + dense candidates
#      fused by RRF, soft labels from the calibrated fusion of BM25 and the
#      cosine), GROUP-1 negatives per query, and the same for every MORE set
#      (each indexed on its own);
#   3. fine-tune a cross-encoder from the base model's weights (listwise
#      softmax over 1 + GROUP-1 candidates + KL distillation from the
#      teacher's scores);
#   4. evaluate on SciFact test and on Cranfield, CISI and CACM: BM25 and
#      hybrid top-DEPTH, reranked (replacing their order, and fused with
#      their lists by RRF), recording each against its candidates in the
#      model's manifest;
#   5. install it as $ANNA_HOME/models/$NAME. Search and mining use it unasked
#      only where those measurements say it helps (annactl models list).
# Every stage resumes: after Ctrl-C or kill -9, run the script again.
# Usage: scripts/reranker.sh [WORK_DIR]  (default $ANNA_HOME/work/reranker)
# Environment, each a flag of annactl rerankers build: BASE (--base, default
# bge-small-en-v1.5, installed if absent; all-MiniLM-L6-v2 with
# NAME=anna-reranker-minilm for the first, faster one), NAME (anna-reranker-bge),
# DATA (--data, ../shared/datasets/scifact), STEPS (120), BATCH (8 queries),
# GROUP (8 = 1 + 7), MAXLEN (192 tokens per pair), LR (7e-5), DISTILL (1),
# SEED (42), DEPTH (100 candidates reranked), EVALS (--eval each: more BEIR
# folders to measure on and record, default Cranfield, CISI and CACM from
# ../shared; EVALS="" for SciFact alone), MORE (--more each: more BEIR sets to
# mine and train on, DIR:SPLIT, e.g. MORE=../shared/datasets/squad2-dev-half:dev),
# MORE_REQUIRE_TOP (--more-require-positive-top: 1 for queries written by
# annactl doc2query, MORE=GEN_DIR:generated; MORE_MINE_ARGS="--require-positive-top K"
# is read as MORE_REQUIRE_TOP=K), INSTALL (1; 0 measures the model and leaves it
# in WORK_DIR/ce/model).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=$ROOT/bin/annactl
HOME_DIR=${ANNA_HOME:-$HOME/.cache/anna}
MORE_REQUIRE_TOP=${MORE_REQUIRE_TOP:-0}
case "${MORE_MINE_ARGS:-}" in
"") ;;
"--require-positive-top "*) MORE_REQUIRE_TOP=${MORE_MINE_ARGS#--require-positive-top } ;;
*)
	echo "reranker: MORE_MINE_ARGS=\"$MORE_MINE_ARGS\": only --require-positive-top K is taken (MORE_REQUIRE_TOP=K)" >&2
	exit 2
	;;
esac
args=(--data "${DATA:-$ROOT/../shared/datasets/scifact}" --work "${1:-$HOME_DIR/work/reranker}"
	--base "${BASE:-bge-small-en-v1.5}" --name "${NAME:-anna-reranker-bge}"
	--steps "${STEPS:-120}" --batch-queries "${BATCH:-8}" --group "${GROUP:-8}" --max-length "${MAXLEN:-192}"
	--lr "${LR:-7e-5}" --distill "${DISTILL:-1}" --seed "${SEED:-42}" --rerank-depth "${DEPTH:-100}"
	--more-require-positive-top "$MORE_REQUIRE_TOP" --per-query 0 --per-set 0)
for d in ${EVALS-$ROOT/../shared/datasets/cranfield $ROOT/../shared/datasets/cisi $ROOT/../shared/datasets/cacm}; do
	args+=(--eval "$d")
done
for m in ${MORE:-}; do
	args+=(--more "$m")
done
[ "${INSTALL:-1}" = 1 ] || args+=(--no-install)
exec "$A" rerankers build "${args[@]}"
