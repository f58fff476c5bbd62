"""Where ONNX Runtime spends its time on an anna model.onnx: the per-op-type
share of kernel time, from ORT's own profiler, over three runs of a batch of
B sequences of T random token ids (all attended to).

    python3 -m venv /tmp/ortvenv && /tmp/ortvenv/bin/pip install onnxruntime==1.24.1 numpy
    /tmp/ortvenv/bin/python tools/ort_profile.py MODEL_DIR/model.onnx 8 128

A reference for deciding what a graph change can buy (the same ORT version
as the one anna loads; two threads, as on the development machine). Not a
dependency of anything: the Python ORT is installed only where this runs.
"""
import collections
import json
import os
import sys

import numpy as np
import onnxruntime as ort


def main():
    path, B, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.intra_op_num_threads = 2
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {}
    for i in s.get_inputs():
        if "mask" in i.name:
            feed[i.name] = np.ones((B, T), np.int64)
        elif "type" in i.name:
            feed[i.name] = np.zeros((B, T), np.int64)
        elif i.type == "tensor(int64)":
            feed[i.name] = rng.integers(100, 20000, (B, T)).astype(np.int64)
        else:
            sys.exit(f"input {i.name} ({i.type}): not fed by this script")
    runs = 3
    for _ in range(runs):
        s.run(None, feed)
    prof = s.end_profiling()
    total = collections.Counter()
    for e in json.load(open(prof)):
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            total[e["args"]["op_name"]] += e["dur"]
    os.remove(prof)
    all_ = sum(total.values())
    print(f"{path}: {B}x{T} tokens, {all_ / 1e3 / runs:.1f} ms of kernel time a run")
    for op, us in total.most_common(15):
        print(f"{op:28s} {us / 1e3 / runs:9.1f} ms  {100 * us / all_:5.1f}%")


if __name__ == "__main__":
    main()
