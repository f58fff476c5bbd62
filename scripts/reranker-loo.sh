#!/usr/bin/env bash
# The general reranker (annactl rerankers build without --data) measured
# leave-one-out on the shared sets: for each of SciFact, Cranfield, CISI and
# CACM, a reranker built from everything else (the other collections'
# judgments, squad2-dev-half, the pseudo-queries of the other corpora, mined
# with the teacher of every installed catalogue model) and measured on the
# left-out collection's test split, which it never saw: BM25 and hybrid top
# DEPTH reranked (its order, and fused by RRF) against BM25 and hybrid. The
# builds share their indexes and mined sets (--mine-dir), so each set is
# mined once; every step resumes (run the script again after a stop).
# Usage: scripts/reranker-loo.sh OUT_DIR
# env: SETS (default "cranfield cisi cacm scifact"), DATA (the shared datasets,
#      default ../shared/datasets), BASE (all-MiniLM-L6-v2), STEPS, MAXLEN,
#      DEPTH (candidates reranked, default 30), ARGS (more flags),
#      ANNACTL (default bin/annactl).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=${ANNACTL:-$ROOT/bin/annactl}
DATA=${DATA:-$ROOT/../shared/datasets}
SETS=${SETS:-cranfield cisi cacm scifact}
OUT=${1:?usage: scripts/reranker-loo.sh OUT_DIR}
mkdir -p "$OUT"
for x in $SETS; do
	[ -f "$OUT/$x.done" ] && continue
	printf '\n== leave out %s (%s)\n' "$x" "$(date -u +%T)"
	# shellcheck disable=SC2086
	/usr/bin/time -v "$A" rerankers build --datasets "$DATA" --leave-out "$x" --name "anna-reranker-loo-$x" --no-install \
		--work "$OUT/$x" --mine-dir "$OUT/mined" --base "${BASE:-all-MiniLM-L6-v2}" \
		${STEPS:+--steps "$STEPS"} ${MAXLEN:+--max-length "$MAXLEN"} --rerank-depth "${DEPTH:-30}" ${ARGS:-} \
		>"$OUT/$x.out" 2>"$OUT/$x.err"
	cat "$OUT/$x.out"
	touch "$OUT/$x.done"
done
python3 - "$OUT" $SETS <<'PY'
import json, sys, os
out, sets = sys.argv[1], sys.argv[2:]
print("| left out (never seen) | BM25 | BM25 + reranker, its order / RRF | hybrid | hybrid + reranker, its order / RRF | pseudo-query check on the training corpora (hybrid → its order / RRF) |")
print("|---|---|---|---|---|---|")
for x in sets:
    p = f"{out}/{x}/eval-{x}.json"
    if not os.path.exists(p):
        print(f"| {x} | (not run) | | | | |"); continue
    t = json.load(open(p))
    n = lambda m: t[m]["ndcg@10"]
    man = json.load(open(f"{out}/{x}/ce/model/anna-model.json"))
    checks = {}
    for m in man.get("measured", []):
        if m["split"] == "pseudo":
            checks.setdefault(m["dataset"], {})[m.get("rrf", False)] = (m["before"], m["after"])
    cs = "; ".join(f"{d} {v[False][0]:.4f} → {v[False][1]:.4f} / {v[True][1]:.4f}" for d, v in sorted(checks.items()) if False in v and True in v)
    print(f"| {x} | {n('lexical'):.4f} | {n('lexical+rerank'):.4f} / {n('lexical+rerank+rrf'):.4f} | {n('hybrid'):.4f} | {n('hybrid+rerank'):.4f} / {n('hybrid+rerank+rrf'):.4f} | {cs} |")
PY
