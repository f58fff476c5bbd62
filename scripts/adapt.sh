#!/usr/bin/env bash
# annactl adapt on a BEIR folder with zero of its judgments used for training:
# index the corpus with the base model, evaluate on the judged split
# (before), adapt (pseudo-queries cut from the documents, plus the train
# split's query texts as an unlabelled log when LOG=train), evaluate again
# (after). The judgments are read only by the two evaluations.
# Usage: scripts/adapt.sh [WORK_DIR]
# env: DATA (default ../shared/datasets/scifact), SPLIT (the evaluated split, default test),
#      LOG (train: the train split's query texts as a query log; none), EXTRACTIVE (1, or 0 to leave the
#      pseudo-queries out), TEACHER (an installed model whose cosine joins the teacher and whose
#      retrieval the whole-corpus check compares with; "" for none; default bge-small-en-v1.5), STEPS (200), SEED (42), ADAPT_ARGS (more annactl adapt flags).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=${ANNACTL:-$ROOT/bin/annactl}
DATA=${DATA:-$ROOT/../shared/datasets/scifact}
SPLIT=${SPLIT:-test}
LOG=${LOG:-train}
EXTRACTIVE=${EXTRACTIVE:-1}
TEACHER=${TEACHER-bge-small-en-v1.5}
STEPS=${STEPS:-200}
SEED=${SEED:-42}
W=${1:-$(mktemp -d)/adapt}
mkdir -p "$W"
step() { printf '\n== %s (%s)\n' "$*" "$(date -u +%T)"; }

step "index $(basename "$DATA") with the base model"
# float32, as the adapted student is (adapt reindexes with its float32 export)
"$A" index --cache --precision float32 --index "$W/idx" "$DATA/corpus.jsonl"
if [ ! -f "$W/before.json" ]; then
	step "evaluate the base model ($SPLIT split)"
	"$A" eval "$DATA" --split "$SPLIT" --index "$W/idx" --modes lexical,dense,hybrid --fusion rrf --json >"$W/before.json"
fi

args=(--index "$W/idx" --work "$W/work" --steps "$STEPS" --seed "$SEED")
if [ "$LOG" = train ] && [ -f "$DATA/qrels/train.tsv" ]; then
	# the train split's query texts, one a line: an unlabelled query log
	python3 - "$DATA" >"$W/log.txt" <<'PY'
import json, sys
d = sys.argv[1]
ids = {l.split("\t")[0] for l in open(f"{d}/qrels/train.tsv") if not l.startswith("query-id")}
for l in open(f"{d}/queries.jsonl"):
    q = json.loads(l)
    if q["_id"] in ids:
        print(" ".join(q["text"].split()))
PY
	args+=(--queries "$W/log.txt")
fi
[ "$EXTRACTIVE" = 0 ] && args+=(--no-extractive)
args+=(--teacher-model "${TEACHER:-none}")
step "adapt (${args[*]} ${ADAPT_ARGS:-})"
# shellcheck disable=SC2086
"$A" adapt "${args[@]}" ${ADAPT_ARGS:-}

step "evaluate the adapted model ($SPLIT split)"
"$A" eval "$DATA" --split "$SPLIT" --index "$W/idx" --modes lexical,dense,hybrid --fusion rrf --json >"$W/after.json"
python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
def rows(f):
    j = json.load(open(f"{w}/{f}"))
    ms = j.get("modes", j) if isinstance(j, dict) else j
    return {m["mode"]: m["ndcg@10"] for m in ms} if isinstance(ms, list) else {k: v["ndcg@10"] for k, v in ms.items()}
b, a = rows("before.json"), rows("after.json")
for m in b:
    print(f"{m:10s} nDCG@10 {b[m]:.4f} -> {a.get(m, float('nan')):.4f} ({a.get(m, 0) - b[m]:+.4f})")
PY
