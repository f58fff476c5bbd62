#!/usr/bin/env bash
# Document expansion from dense neighbours, simulated outside the engine with
# anna's own BM25 and dense lists (issue 64 item 6's lead): each document's
# text gains, for BM25 only, the m words that weigh most in its k nearest
# documents by the encoder's cosine (Σ cosine · tf/length · idf over the
# neighbours, words the document lacks, stop words out), one occurrence each.
# For each set: the base corpus evaluated (lexical, dense, hybrid, with
# --run-out), the expanded corpus for each (k, m) evaluated lexically, and
# scripts/expand_sim.py fuses each lexical run with the base's dense run as
# internal/fusion's DBSF does (its base line reproduces annactl's hybrid).
# No judgment is used to expand; the judged queries only score.
# NEIGHBOURS="MODEL,MODEL" takes the neighbours by the mean cosine of these
# installed models (each embeds the corpus; "" is the default model), the
# expanded runs then named NAME-kK-mM with NAME from TAG (default: the models).
# PRF=1 also embeds the queries and runs expand_sim.py prf (dense
# pseudo-relevance feedback) over the base's and each expanded BM25 run.
# Usage: scripts/expand-sim.sh [SET ...]   (default: cranfield cisi cacm scifact)
# env: DATA (default ../shared/datasets), ANNACTL (default bin/annactl),
#      GRID ("k,m ...", default "3,10"), OUT (default /tmp/expand-sim), PYTHON (default:
#      $ANNA_HOME/venv's, made by scripts/pydeps.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=${ANNACTL:-$ROOT/bin/annactl}
DATA=${DATA:-$ROOT/../shared/datasets}
OUT=${OUT:-/tmp/expand-sim}
PY=${PYTHON:-}
if [ -z "$PY" ]; then # the reference tools' venv (numpy pinned there), made or checked by pydeps.sh
	bash "$ROOT/scripts/pydeps.sh"
	PY=${ANNA_HOME:-$HOME/.cache/anna}/venv/bin/python
fi
S=$ROOT/scripts/expand_sim.py
mkdir -p "$OUT"
for s in ${*:-cranfield cisi cacm scifact}; do
	W=$OUT/$s
	mkdir -p "$W"
	qrels=$DATA/$s/qrels/test.tsv
	[ -s "$W/base.txt" ] || "$A" eval "$DATA/$s" --modes lexical,dense,hybrid --run-out "$W/base.run" >"$W/base.txt"
	[ -s "$W/docs.bin" ] || "$A" embed "$DATA/$s/corpus.jsonl" --format binary --output "$W/docs.bin"
	vecs=() tag=
	IFS=, read -ra models <<<"${NEIGHBOURS:-}"
	for mo in "${models[@]}"; do
		if [ -z "$mo" ]; then vecs+=("$W/docs.bin"); continue; fi
		[ -s "$W/docs.$mo.bin" ] || "$A" embed "$DATA/$s/corpus.jsonl" --model "$mo" --format binary --output "$W/docs.$mo.bin"
		vecs+=("$W/docs.$mo.bin")
	done
	[ ${#vecs[@]} -gt 0 ] || vecs=("$W/docs.bin")
	[ -z "${NEIGHBOURS:-}" ] || tag=${TAG:-$(echo "$NEIGHBOURS" | tr ',' '+')}-
	runs=()
	for km in ${GRID:-3,10}; do
		k=${km%,*} m=${km#*,} E=$W/${tag}k$k-m$m
		if [ ! -s "$E.txt" ]; then
			mkdir -p "$E"
			"$PY" "$S" expand --corpus "$DATA/$s/corpus.jsonl" --vectors "$(IFS=,; echo "${vecs[*]}")" --k "$k" --m "$m" --out "$E/corpus.jsonl"
			ln -sf "$DATA/$s/queries.jsonl" "$E/queries.jsonl"
			ln -sfn "$DATA/$s/qrels" "$E/qrels"
			"$A" eval "$E" --modes lexical --run-out "$E.run" >"$E.txt"
		fi
		runs+=("$E.run")
	done
	"$PY" "$S" fuse --name "$s" --qrels "$qrels" --dense "$W/base.dense.run" --lexical "$W/base.lexical.run" "${runs[@]}"
	if [ -n "${PRF:-}" ]; then
		[ -s "$W/queries.bin" ] || "$A" embed "$DATA/$s/queries.jsonl" --query --format binary --output "$W/queries.bin"
		"$PY" "$S" prf --name "$s" --qrels "$qrels" --vectors "$W/docs.bin" --queries "$W/queries.bin" --k 3 5 --b 0.5 1 -- "$W/base.lexical.run" "${runs[@]}"
	fi
done
