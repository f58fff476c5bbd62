#!/usr/bin/env python3
"""hnswlib / FAISS-HNSW baseline for benchmarks/hnsw_test.go.

Reads the vectors the Go benchmark wrote (raw little-endian float32, row
major), builds each library's HNSW with the same M / efConstruction, sweeps
efSearch and prints one JSON object: per library the build time and, per ef,
recall@k against the Go side's exact neighbours and single-threaded QPS.

Both libraries search on one thread so that QPS compares per core; they
build on --threads threads (default 1: the single-threaded comparison of
BenchmarkHNSW; BenchmarkHNSW1M passes the Go side's GOMAXPROCS).
"""
import argparse
import json
import sys
import time

import numpy as np


def load(path, rows, dim, dtype):
    a = np.fromfile(path, dtype=dtype)
    if a.size != rows * dim:
        sys.exit(f"{path}: {a.size} values, want {rows}x{dim}")
    return a.reshape(rows, dim)


def recall(found, gt):
    k = gt.shape[1]
    hits = sum(len(set(f[:k].tolist()) & set(g.tolist())) for f, g in zip(found, gt))
    return hits / gt.size


def run_hnswlib(base, queries, gt, args):
    import hnswlib

    idx = hnswlib.Index(space="ip", dim=base.shape[1])
    t = time.perf_counter()
    idx.init_index(max_elements=base.shape[0], M=args.M, ef_construction=args.efc, random_seed=1)
    idx.set_num_threads(args.threads)
    idx.add_items(base, np.arange(base.shape[0]), num_threads=args.threads)
    build = time.perf_counter() - t
    sweep = []
    for ef in args.ef:
        idx.set_ef(max(ef, args.k))
        best = None
        for _ in range(args.repeat):
            t = time.perf_counter()
            labels, _ = idx.knn_query(queries, k=args.k, num_threads=1)
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
        sweep.append({"ef": ef, "recall": recall(labels, gt), "qps": len(queries) / best})
    return {"version": getattr(hnswlib, "__version__", "0.8.0"), "build_s": build, "sweep": sweep}


def run_faiss(base, queries, gt, args):
    import faiss

    faiss.omp_set_num_threads(args.threads)
    idx = faiss.IndexHNSWFlat(base.shape[1], args.M, faiss.METRIC_INNER_PRODUCT)
    idx.hnsw.efConstruction = args.efc
    t = time.perf_counter()
    idx.add(base)
    build = time.perf_counter() - t
    faiss.omp_set_num_threads(1)
    sweep = []
    for ef in args.ef:
        idx.hnsw.efSearch = max(ef, args.k)
        best = None
        for _ in range(args.repeat):
            t = time.perf_counter()
            _, labels = idx.search(queries, args.k)
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
        sweep.append({"ef": ef, "recall": recall(labels, gt), "qps": len(queries) / best})
    return {"version": faiss.__version__, "build_s": build, "sweep": sweep}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--gt", required=True, help="int32 exact neighbour indices, nq x k")
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--nq", type=int, required=True)
    p.add_argument("--dim", type=int, required=True)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--M", type=int, default=16)
    p.add_argument("--efc", type=int, default=200)
    p.add_argument("--ef", type=lambda s: [int(x) for x in s.split(",")], default=[10, 16, 24, 32, 48, 64, 96, 128])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--libs", default="hnswlib,faiss")
    p.add_argument("--threads", type=int, default=1, help="build threads (search is single-threaded)")
    args = p.parse_args()

    base = load(args.base, args.n, args.dim, np.float32)
    queries = load(args.queries, args.nq, args.dim, np.float32)
    gt = load(args.gt, args.nq, args.k, np.int32)
    out = {}
    for lib in args.libs.split(","):
        try:
            out[lib] = {"hnswlib": run_hnswlib, "faiss": run_faiss}[lib](base, queries, gt, args)
        except ImportError as e:
            out[lib] = {"error": f"not installed: {e}"}
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
