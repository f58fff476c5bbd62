#!/usr/bin/env python3
"""One PyTorch LoRA training step of a decoder embedder, the same step as
train/decoder's BenchmarkSmolLM2LoRAStep (CPU) and train/cuda's
BenchmarkDecoderStepOnGPU: transformers' LlamaModel (float32,
its default sdpa attention, causal) from DIR (config.json + model.safetensors
as the Go benchmark writes them), LoRA on q, k, v, o, gate, up and down
applied by hand as peft does (y = base(x) + alpha/r · (x·Aᵀ)·Bᵀ, base frozen),
or, with RANK 0, every parameter trained (full fine-tuning), over Q queries + Q*G documents of T random tokens, last-token pooling,
InfoNCE (in-batch, temperature 0.05), backward, gradient clipping at 1 and an
AdamW update. Prints JSON {"seconds": best step time over STEPS}.

Usage: tools/decoder_step_bench.py DIR Q G T RANK ALPHA [STEPS [DEVICE [MATH]]]
DEVICE cpu (default) or cuda; MATH fp32 (default) or tf32 (cuda products).
"""
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaModel


class LoRALinear(nn.Module):
    def __init__(self, base, r, alpha):
        super().__init__()
        self.base, self.s = base, alpha / r
        base.weight.requires_grad_(False)
        self.A = nn.Parameter(torch.empty(r, base.in_features).uniform_(-base.in_features ** -0.5, base.in_features ** -0.5))
        self.B = nn.Parameter(torch.zeros(base.out_features, r))

    def forward(self, x):
        return self.base(x) + self.s * ((x @ self.A.T) @ self.B.T)


def main():
    d, Q, G, T, r, alpha = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    steps = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    dev = torch.device(sys.argv[8] if len(sys.argv) > 8 else "cpu")
    if dev.type == "cuda":
        tf32 = len(sys.argv) > 9 and sys.argv[9] == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()
    torch.set_num_threads(os.cpu_count())
    torch.manual_seed(0)
    cfg = json.load(open(f"{d}/config.json"))
    hf = LlamaConfig(vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"], intermediate_size=cfg["intermediate_size"],
                     num_hidden_layers=cfg["num_hidden_layers"], num_attention_heads=cfg["num_attention_heads"],
                     num_key_value_heads=cfg.get("num_key_value_heads") or cfg["num_attention_heads"],
                     max_position_embeddings=cfg["max_position_embeddings"], rms_norm_eps=cfg["rms_norm_eps"],
                     rope_theta=cfg["rope_theta"], tie_word_embeddings=False)
    net = LlamaModel(hf)
    net.load_state_dict(load_file(f"{d}/model.safetensors"), strict=True)
    if r > 0:
        for p in net.parameters():
            p.requires_grad_(False)
        for layer in net.layers:
            for mod, names in ((layer.self_attn, ("q_proj", "k_proj", "v_proj", "o_proj")), (layer.mlp, ("gate_proj", "up_proj", "down_proj"))):
                for n in names:
                    setattr(mod, n, LoRALinear(getattr(mod, n), r, alpha))
    net.to(dev)
    params = [p for p in net.parameters() if p.requires_grad]
    with torch.no_grad():  # B nonzero, as after the first steps
        for p in params:
            if r > 0 and p.shape[1] == r:
                p.normal_(0, 0.01)
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
    N = Q + Q * G
    ids = torch.randint(1000, cfg["vocab_size"], (N, T)).to(dev)
    mask = torch.ones(N, T, dtype=torch.long, device=dev)
    best = float("inf")
    for _ in range(steps):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad()
        x = net(input_ids=ids, attention_mask=mask).last_hidden_state
        e = x[:, -1]
        q, dd = F.normalize(e[:Q], dim=-1), F.normalize(e[Q:], dim=-1)
        loss = F.cross_entropy(q @ dd.T / 0.05, torch.arange(Q, device=dev) * G)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sync()
        best = min(best, time.perf_counter() - t0)
    print(json.dumps({"seconds": best, "threads": torch.get_num_threads(), "loss": loss.item()}))


if __name__ == "__main__":
    main()
