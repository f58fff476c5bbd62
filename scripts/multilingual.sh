#!/usr/bin/env bash
# The multilingual benchmark (docs/results/multilingual.md): annactl eval over
# every shared multilingual set (and, with ENGLISH=1, the English ones) with
# one model, each mode's TREC run kept.
#   scripts/multilingual.sh MODEL PRECISION OUTDIR [MODES]
# MODEL: an installed model's name (multilingual, all-MiniLM-L6-v2...);
# PRECISION: int8 or float32; MODES: annactl eval --modes (default
# lexical,dense,hybrid). Writes OUTDIR/SET.MODE.trec and OUTDIR/summary.tsv
# (set, mode, nDCG@10, Recall@100, MRR@10, MAP, ms/query). Needs annactl on
# PATH (or $ANNACTL) and ../shared/datasets.
set -euo pipefail
model=$1 precision=$2 out=$3 modes=${4:-lexical,dense,hybrid}
annactl=${ANNACTL:-annactl}
data=${DATASETS:-$(cd "$(dirname "$0")/../.." && pwd)/shared/datasets}
sets="xquad-en xquad-de xquad-es xquad-zh xquad-ar xquad-ru xquad-hi xquad-de-en xquad-es-en xquad-zh-en xquad-ar-en xquad-ru-en xquad-hi-en jsquad"
if [ "${ENGLISH:-0}" = 1 ]; then
	sets="$sets scifact cranfield cisi cacm squad2-dev-half"
fi
mkdir -p "$out"
for s in $sets; do
	split=test
	[ "$s" = squad2-dev-half ] && split=dev
	log=$("$annactl" eval "$data/$s" --split "$split" --model "$model" --precision "$precision" --modes "$modes" --run-out "$out/$s.trec" 2>&1) || { echo "$log" >&2; exit 1; }
	echo "$log" | awk -v s="$s" '$1 ~ /^(lexical|dense|hybrid)/ && NF == 6 { OFS="\t"; print s, $1, $2, $3, $4, $5, $6 }' >> "$out/summary.tsv"
	echo "$log" | head -1
done
