"""Document expansion from dense neighbours, outside the engine (scripts/expand-sim.sh says what and why).

expand: write a BEIR corpus whose texts gain each document's expansion words; --vectors takes one
        annactl embed file, or several (comma-separated, one per model, the same documents in the same order),
        whose cosines are averaged: the neighbours of every model the teacher has.
prf:    dense pseudo-relevance feedback (Rocchio on vectors): each query's vector plus b times the mean of its
        first k hits' vectors, k from the hybrid (DBSF) list of a BM25 run and the exact dense list, optionally
        scaled by how much the two lists' top 10 agree; exact dense search over the first-window vectors of
        annactl embed (so its dense lists are not annactl's, which takes each document's best window);
        each BM25 run fused with the base and the fed-back dense lists.
lists:  nDCG@10 of several runs fused by DBSF (each set of runs "A+B" an argument), against the first set;
        --weights weighs the lists of each set with as many runs (adapt's calibrated teacher weights, teacher.json).
qprf:   query-side feedback for BM25: each query gains the m words weighing most in its first k hits of a run.
fuse:   score annactl eval's TREC runs: BM25 of the base and of the expanded corpus, each fused with the
        base's dense run by DBSF as internal/fusion does it (mean ± 3σ, sample σ, unclamped, equal weights,
        the top 100 of each list), nDCG@10 as trec_eval's ndcg_cut.10.
"""
import argparse, collections, json, math, re, struct

import numpy as np

STOP = set("""a an and are as at be but by for from has have in into is it its of on or such that the their
then there these they this to was were will with which what how can do does not no than been also may more most
other some our we you your i he she his her them who whom whose where when why all any both each few many much
very s t just only own same so too over under again further once here between during before after above below up
down out off about against""".split())


def words(t):
    return [w for w in re.findall(r"[a-z0-9]+", t.lower()) if w not in STOP and len(w) > 1]


def vectors(path):
    """annactl embed --format binary: ids and L2-normalised rows."""
    b = open(path, "rb").read()
    assert b[:8] == b"ANNAEMB1", path
    dim, _ = struct.unpack("<II", b[8:16])
    o, ids, rows = 16, [], []
    while o < len(b):
        (n,) = struct.unpack("<I", b[o:o + 4])
        o += 4
        ids.append(str(json.loads(b[o:o + n])))
        o += n
        rows.append(np.frombuffer(b[o:o + 4 * dim], dtype="<f4"))
        o += 4 * dim
    v = np.array(rows, dtype=np.float64)
    return ids, v / np.linalg.norm(v, axis=1, keepdims=True)


def corpus_terms(rows, ids):
    """Each document's word counts (title and text) and the words' idf over the documents ids."""
    dt = {i: collections.Counter(words((rows[i].get("title") or "") + " " + rows[i].get("text", ""))) for i in ids}
    df = collections.Counter()
    for d in dt.values():
        df.update(d.keys())
    return dt, {t: math.log(len(dt) / n) for t, n in df.items()}


def expand(a):
    vs = [vectors(p) for p in a.vectors.split(",")]
    ids = vs[0][0]
    if any(i != ids for i, _ in vs[1:]):
        raise SystemExit(f"{a.vectors}: the files hold other documents or another order")
    rows = {str(j["_id"]): j for j in map(json.loads, open(a.corpus))}
    byid, idf = corpus_terms(rows, ids)
    dt = [byid[i] for i in ids]
    sim = sum(v @ v.T for _, v in vs) / len(vs)
    np.fill_diagonal(sim, -1)
    nb = np.argsort(-sim, axis=1)[:, :a.k]
    with open(a.out, "w") as f:
        for n, i in enumerate(ids):
            cand = collections.defaultdict(float)
            for j in nb[n]:
                length = sum(dt[j].values())
                for t, tf in dt[j].items():
                    if t not in dt[n]:
                        cand[t] += sim[n, j] * tf / length * idf[t]
            add = sorted(cand, key=lambda t: (-cand[t], t))[:a.m]
            row = dict(rows[i])
            row["text"] = row.get("text", "") + " " + " ".join(add)
            f.write(json.dumps(row) + "\n")


def run(path):
    r = collections.defaultdict(dict)
    for line in open(path):
        q, _, d, _, s, _ = line.split()
        r[q][d] = float(s)
    return r


def ndcg10(rank, rel):
    dcg = sum(rel.get(d, 0) / math.log2(j + 2) for j, d in enumerate(rank[:10]))
    ideal = sorted(rel.values(), reverse=True)[:10]
    idcg = sum(x / math.log2(j + 2) for j, x in enumerate(ideal))
    return dcg / idcg if idcg else 0


def dbsf(lists, k=100, weights=None):
    tot = collections.defaultdict(float)
    for i, hits in enumerate(lists):
        w = weights[i] if weights else 1
        top = sorted(hits.items(), key=lambda x: -x[1])[:k]
        v = np.array([s for _, s in top])
        sd = v.std(ddof=1) if len(v) > 1 else 0
        for d, x in top:
            tot[d] += w * ((x - (v.mean() - 3 * sd)) / (6 * sd) if sd > 0 else 0.5)
    return sorted(tot, key=lambda d: -tot[d])


def judged(path):
    qrels = collections.defaultdict(dict)
    for line in list(open(path))[1:]:
        q, d, s = line.split()[:3]
        if int(s) > 0:
            qrels[q][d] = int(s)
    return qrels


def prf(a):
    ids, dv = vectors(a.vectors)
    qids, qv = vectors(a.queries)
    qrels = judged(a.qrels)
    at = {q: n for n, q in enumerate(qids)}
    pos = {d: n for n, d in enumerate(ids)}
    qs = [q for q in qrels if q in at]
    Q = qv[[at[q] for q in qs]]

    def search(M):
        S = M @ dv.T
        top = np.argsort(-S, axis=1)[:, :100]
        return [{ids[j]: float(S[r, j]) for j in top[r]} for r in range(len(qs))]

    def ranked(h, n):
        return sorted(h, key=lambda d: -h[d])[:n]

    def mean(f):
        return sum(f(r, q) for r, q in enumerate(qs)) / len(qs)

    dense = search(Q)
    for path in a.lexical:
        lex = run(path)
        name = path.rsplit("/", 1)[-1]
        base = mean(lambda r, q: ndcg10(dbsf([lex.get(q, {}), dense[r]]), qrels[q]))
        print(f"{a.name} {name}: {len(qs)} queries; exact dense {mean(lambda r, q: ndcg10(ranked(dense[r], 10), qrels[q])):.4f}, hybrid {base:.4f}")
        for k in a.k:
            for b in a.b:
                for agree in (False, True):
                    fb = []
                    for r, q in enumerate(qs):
                        first = dbsf([lex.get(q, {}), dense[r]])[:k]
                        w = len(set(ranked(lex.get(q, {}), 10)) & set(ranked(dense[r], 10))) / 10 if agree else 1
                        fb.append(b * w * dv[[pos[d] for d in first]].mean(axis=0))
                    M = Q + np.array(fb)
                    M /= np.linalg.norm(M, axis=1, keepdims=True)
                    d2 = search(M)
                    dn = mean(lambda r, q: ndcg10(ranked(d2[r], 10), qrels[q]))
                    hy = mean(lambda r, q: ndcg10(dbsf([lex.get(q, {}), d2[r]]), qrels[q]))
                    print(f"  k {k}, b {b}{', agreement-scaled' if agree else ''}: dense {dn:.4f}, hybrid {hy:.4f} ({hy - base:+.4f})")


def lists(a):
    qrels = judged(a.qrels)
    runs = {p: run(p) for combo in a.fused for p in combo.split("+")}
    qs = [q for q in qrels if any(q in r for r in runs.values())]
    base = None
    for combo in a.fused:
        rs = [runs[p] for p in combo.split("+")]
        ws = [float(w) for w in a.weights.split(",")] if a.weights and len(a.weights.split(",")) == len(rs) else None
        v = sum(ndcg10(dbsf([r.get(q, {}) for r in rs], weights=ws), qrels[q]) for q in qs) / len(qs)
        base = v if base is None else base
        print(f"{a.name}: {' + '.join(p.rsplit('/', 1)[-1] for p in combo.split('+'))}: {v:.4f} ({v - base:+.4f})")


def qprf(a):
    rows = {str(j["_id"]): j for j in map(json.loads, open(a.corpus))}
    dt, idf = corpus_terms(rows, rows)
    r = run(a.run)
    with open(a.out, "w") as f:
        for q in map(json.loads, open(a.queries)):
            hits = r.get(str(q["_id"]), {})
            have = set(words(q["text"]))
            cand = collections.defaultdict(float)
            for d in sorted(hits, key=lambda d: -hits[d])[:a.k]:
                n = sum(dt[d].values()) or 1
                for t, tf in dt[d].items():
                    if t not in have:
                        cand[t] += tf / n * idf[t]
            q = dict(q)
            q["text"] += " " + " ".join(sorted(cand, key=lambda t: (-cand[t], t))[:a.m])
            f.write(json.dumps(q) + "\n")


def fuse(a):
    qrels = judged(a.qrels)
    dense, lex = run(a.dense), run(a.lexical)
    qs = [q for q in qrels if q in dense]

    def mean(f):
        return sum(f(q) for q in qs) / len(qs)

    def alone(r):
        return mean(lambda q: ndcg10(sorted(r.get(q, {}), key=lambda d: -r[q][d]), qrels[q]))

    def hybrid(r):
        return mean(lambda q: ndcg10(dbsf([r.get(q, {}), dense[q]]), qrels[q]))

    base = (alone(lex), hybrid(lex))
    print(f"{a.name}: {len(qs)} queries; dense {alone(dense):.4f}; base lexical {base[0]:.4f}, hybrid {base[1]:.4f}")
    for path in a.expanded:
        r = run(path)
        lx, hy = alone(r), hybrid(r)
        print(f"  {path.rsplit('/', 1)[-1]}: lexical {lx:.4f} ({lx - base[0]:+.4f}), hybrid {hy:.4f} ({hy - base[1]:+.4f})")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("expand")
    e.add_argument("--corpus", required=True)
    e.add_argument("--vectors", required=True)
    e.add_argument("--k", type=int, default=3)
    e.add_argument("--m", type=int, default=10)
    e.add_argument("--out", required=True)
    p = sub.add_parser("prf")
    p.add_argument("--name", required=True)
    p.add_argument("--qrels", required=True)
    p.add_argument("--vectors", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--k", type=int, nargs="+", default=[3])
    p.add_argument("--b", type=float, nargs="+", default=[0.5, 1.0])
    p.add_argument("lexical", nargs="+")
    l = sub.add_parser("lists")
    l.add_argument("--name", required=True)
    l.add_argument("--qrels", required=True)
    l.add_argument("--weights", default="", help="W,W,...: weights of the lists of every fused set with as many runs (DBSF weighted)")
    l.add_argument("fused", nargs="+", help="RUN+RUN[+RUN...]: one fused set of runs; the first is the base")
    r = sub.add_parser("qprf")
    r.add_argument("--corpus", required=True)
    r.add_argument("--queries", required=True)
    r.add_argument("--run", required=True)
    r.add_argument("--k", type=int, default=3)
    r.add_argument("--m", type=int, default=10)
    r.add_argument("--out", required=True)
    f = sub.add_parser("fuse")
    f.add_argument("--name", required=True)
    f.add_argument("--qrels", required=True)
    f.add_argument("--dense", required=True)
    f.add_argument("--lexical", required=True)
    f.add_argument("expanded", nargs="*")
    a = ap.parse_args()
    {"expand": expand, "prf": prf, "lists": lists, "qprf": qprf, "fuse": fuse}[a.cmd](a)


if __name__ == "__main__":
    main()
