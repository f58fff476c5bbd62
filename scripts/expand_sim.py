"""Document expansion from dense neighbours, outside the engine (scripts/expand-sim.sh says what and why).

expand: write a BEIR corpus whose texts gain each document's expansion words.
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


def expand(a):
    ids, dv = vectors(a.vectors)
    rows = {str(j["_id"]): j for j in map(json.loads, open(a.corpus))}
    dt = [collections.Counter(words((rows[i].get("title") or "") + " " + rows[i].get("text", ""))) for i in ids]
    df = collections.Counter()
    for d in dt:
        df.update(d.keys())
    idf = {t: math.log(len(ids) / n) for t, n in df.items()}
    sim = dv @ dv.T
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


def dbsf(lists, k=100):
    tot = collections.defaultdict(float)
    for hits in lists:
        top = sorted(hits.items(), key=lambda x: -x[1])[:k]
        v = np.array([s for _, s in top])
        sd = v.std(ddof=1) if len(v) > 1 else 0
        for d, x in top:
            tot[d] += (x - (v.mean() - 3 * sd)) / (6 * sd) if sd > 0 else 0.5
    return sorted(tot, key=lambda d: -tot[d])


def fuse(a):
    qrels = collections.defaultdict(dict)
    for line in list(open(a.qrels))[1:]:
        q, d, s = line.split()[:3]
        if int(s) > 0:
            qrels[q][d] = int(s)
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
    f = sub.add_parser("fuse")
    f.add_argument("--name", required=True)
    f.add_argument("--qrels", required=True)
    f.add_argument("--dense", required=True)
    f.add_argument("--lexical", required=True)
    f.add_argument("expanded", nargs="*")
    a = ap.parse_args()
    expand(a) if a.cmd == "expand" else fuse(a)


if __name__ == "__main__":
    main()
