#!/usr/bin/env python3
"""One PyTorch training step of a BERT bi-encoder, the same step as
benchmarks/train_test.go (CPU) and train/cuda's BenchmarkTrainStepOnGPU:
forward over Q queries + Q*G documents of T random tokens, mean pooling,
InfoNCE (in-batch, temperature 0.05), backward, gradient clipping at 1 and an
AdamW update. Prints JSON {"seconds": best step time}.

Usage: tools/torch_step_bench.py CHECKPOINT_DIR Q G T [STEPS [DEVICE [MATH]]]
DEVICE cpu (default) or cuda; MATH fp32 (default) or tf32 (cuda products).
"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
try:
    from safetensors.torch import load_file
except ImportError:  # a torch install without safetensors (a GPU machine's): read the format by hand
    def load_file(path):
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
            data = f.read()
        types = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64}
        out = {}
        for k, v in header.items():
            if k == "__metadata__":
                continue
            a, b = v["data_offsets"]
            out[k] = torch.frombuffer(bytearray(data[a:b]), dtype=types[v["dtype"]]).reshape(v["shape"])
        return out

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ref import encoder  # noqa: E402


def main():
    d, Q, G, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    dev = torch.device(sys.argv[6] if len(sys.argv) > 6 else "cpu")
    tf32 = len(sys.argv) > 7 and sys.argv[7] == "tf32"
    torch.set_num_threads(os.cpu_count())
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()
    cfg = json.load(open(f"{d}/config.json"))
    w = {k: v.float().to(dev) for k, v in load_file(f"{d}/model.fp16.safetensors" if os.path.exists(f"{d}/model.fp16.safetensors") else f"{d}/model.safetensors").items()
         if v.is_floating_point()}
    params = [v.requires_grad_(True) for k, v in w.items() if not k.startswith("pooler.")]
    encode, _, _ = encoder(w, cfg)
    opt = torch.optim.AdamW(params, lr=2e-5, weight_decay=0.01)
    g = torch.Generator().manual_seed(0)
    N = Q + Q * G
    ids = torch.randint(1000, cfg["vocab_size"], (N, T), generator=g).to(dev)
    types = torch.zeros_like(ids)
    mask = torch.ones(N, T, device=dev)
    best = float("inf")
    for _ in range(steps):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad()
        x = encode(ids, types, mask)
        e = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        q, dd = F.normalize(e[:Q], dim=-1), F.normalize(e[Q:], dim=-1)
        loss = F.cross_entropy(q @ dd.T / 0.05, torch.arange(Q, device=dev) * G)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sync()
        best = min(best, time.perf_counter() - t0)
    print(json.dumps({"seconds": best, "threads": torch.get_num_threads(), "loss": loss.item(), "device": str(dev),
                      "name": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"}))


if __name__ == "__main__":
    main()
