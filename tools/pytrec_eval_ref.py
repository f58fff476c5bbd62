"""Reference IR metrics from pytrec_eval (trec_eval), the library BEIR uses.

Reads {"qrels": {qid: {doc: grade}}, "run": {qid: [doc, ...]}} as JSON on
stdin (runs best first) and writes {qid: {"ndcg10", "recall100", "map",
"mrr10"}} as JSON on stdout. Used by eval's TestAgainstPytrecEval.
"""
import json
import sys

import pytrec_eval

data = json.load(sys.stdin)
qrels = data["qrels"]
# Strictly decreasing scores so trec_eval's re-sort keeps the given order.
run = {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in data["run"].items()}
top10 = {q: {d: float(len(docs) - i) for i, d in enumerate(docs[:10])} for q, docs in data["run"].items()}

full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "map"}).evaluate(run)
# trec_eval's recip_rank has no cut-off; on the top 10 it is MRR@10.
rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
out = {}
for q, m in full.items():
    out[q] = {"ndcg10": m["ndcg_cut_10"], "recall100": m["recall_100"], "map": m["map"], "mrr10": rr[q]["recip_rank"]}
json.dump(out, sys.stdout)
