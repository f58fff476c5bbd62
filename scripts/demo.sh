#!/usr/bin/env bash
# The main job end to end on data that ships with the repo: embed a few
# sentences, index a small corpus, search it in every mode, show stats.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=$ROOT/bin/annactl
DEMO=${ANNA_DEMO_DIR:-$(mktemp -d)/anna-demo}
step() { printf '\n== %s\n' "$*"; }

step "annactl embed: 4 sentences -> 384-d vectors (first 6 values shown)"
"$A" embed "$ROOT/testdata/demo/sentences.jsonl" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
for r in rows:
    print(r["id"], len(r["embedding"]), [round(x, 4) for x in r["embedding"][:6]])
v = {r["id"]: r["embedding"] for r in rows}
dot = lambda a, b: sum(x * y for x, y in zip(a, b))
print("cosine(s1, s2) =", round(dot(v["s1"], v["s2"]), 4), "(the default int8 form; published for the float32 model: 0.8939)")'

step "annactl index: testdata/demo/corpus.jsonl -> $DEMO"
"$A" index --index "$DEMO" "$ROOT/testdata/demo/corpus.jsonl"

for mode in lexical dense hybrid; do
	step "annactl search --mode $mode 'how do graphs find nearest vectors quickly'"
	"$A" search --index "$DEMO" --mode "$mode" -k 3 "how do graphs find nearest vectors quickly"
done

step "annactl search --explain 'avoid false negatives when mining training data'"
"$A" search --index "$DEMO" -k 3 --explain "avoid false negatives when mining training data"

step "annactl stats"
"$A" stats --index "$DEMO"
echo
echo "demo index left at $DEMO"
