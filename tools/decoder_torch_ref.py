#!/usr/bin/env python3
"""PyTorch reference for anna's decoder trainer (package train/decoder).

For each DIR given, reads the tiny decoder the Go test wrote (config.json as
anna's model.Config marshals it, model.safetensors named as transformers'
LlamaModel state dict, LoRA factors as peft names them) and the batch and
objective in DIR/batch.json, runs them with autograd in float64 and writes
DIR/grads.safetensors: "loss" (shape [1]) and the gradient of every
trainable tensor under its own name. One process serves every DIR, so
transformers is imported once.

Llama and Qwen2 run in transformers' own LlamaModel / Qwen2Model (4.46.3,
eager attention) through torch.func.functional_call, with each LoRA-adapted
weight replaced by W + alpha/r · B·A. Causal attention gets the usual 2-D
padding mask (transformers builds the causal mask); bidirectional attention
gets a full 4-D additive mask (0 for every real key, the dtype's minimum for
padding), which transformers uses as given.

transformers 4.46.3 has no Qwen3, so Qwen3 (per-head RMSNorm of queries and
keys after the projections and before the rotary positions, head_dim of its
own, no biases) is written out here by hand from transformers' pieces
(LlamaRotaryEmbedding, apply_rotary_pos_emb, repeat_kv, LlamaRMSNorm's
arithmetic, eager softmax in float32 as transformers does). The hand-written
model is checked on every run against transformers 4.51.3's own Qwen3Model
(installed beside 4.46.3 by make pydeps, run in a process of its own) on the
same weights and batch: the script fails if their last hidden states differ
by more than 1e-9.

The trainable pooling heads (last-layer "latent" and paper 002's
"multilayer") are written out here too (head()), over transformers'
last_hidden_state and hidden_states[1:].

Usage: tools/decoder_torch_ref.py DIR [DIR...]
"""
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch.func import functional_call
from transformers import LlamaConfig, LlamaModel, Qwen2Config, Qwen2Model
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb, repeat_kv


from decoder_ref_common import DT, additive_mask, effective, hf_config, load


def rms(x, w, eps):
    """LlamaRMSNorm's arithmetic (float32 inside, as transformers)."""
    dt = x.dtype
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(dt)


def manual_decoder(cfg, w, ids, mask4, qk_norm=True):
    """Qwen3's forward written out; qk_norm=False makes it a Llama. Returns
    the last hidden state and, as transformers' hidden_states[1:], every
    layer's output (the last one after the final norm)."""
    N, T = ids.shape
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    D = cfg.get("head_dim") or C // H
    eps = cfg["rms_norm_eps"]
    rot = LlamaRotaryEmbedding(config=hf_config(cfg, LlamaConfig))
    x = w["embed_tokens.weight"][ids]
    cos, sin = rot(x, torch.arange(T)[None].expand(N, T))
    states = []
    for l in range(cfg["num_hidden_layers"]):
        if l > 0:
            states.append(x)
        p = f"layers.{l}."
        h = rms(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(N, T, H, D)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(N, T, KV, D)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(N, T, KV, D)
        if qk_norm:
            q = rms(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k, v = repeat_kv(k, H // KV), repeat_kv(v, H // KV)
        s = q @ k.transpose(2, 3) / math.sqrt(D) + mask4
        a = F.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
        ctx = (a @ v).transpose(1, 2).reshape(N, T, H * D)
        x = x + ctx @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"], eps)
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (F.silu(g) * u) @ w[p + "mlp.down_proj.weight"].T
    x = rms(x, w["norm.weight"], eps)
    return x, states + [x]


def head(w, X, H):
    """The trainable pooling head over rows X (n×C): latent queries attend
    to K = X·Wkᵀ, V = X·Wvᵀ (H heads); Z = (P·V)·Woᵀ; Y = Z + fc2(GELU(fc1(Z)));
    the mean of Y's rows."""
    lat = w["pooling.latents"]
    r, C = lat.shape
    D = C // H
    k = (X @ w["pooling.k_proj.weight"].T).view(-1, H, D).transpose(0, 1)
    v = (X @ w["pooling.v_proj.weight"].T).view(-1, H, D).transpose(0, 1)
    q = lat.view(r, H, D).transpose(0, 1)
    p = (q @ k.transpose(1, 2) / math.sqrt(D)).softmax(-1)
    z = (p @ v).transpose(0, 1).reshape(r, C) @ w["pooling.o_proj.weight"].T
    u = z @ w["pooling.mlp.fc1.weight"].T + w["pooling.mlp.fc1.bias"]
    y = z + F.gelu(u) @ w["pooling.mlp.fc2.weight"].T + w["pooling.mlp.fc2.bias"]
    return y.mean(0)


def check_qwen3(d, w, cfg, ids, mask4, real):
    """Exits unless manual_decoder gives the last hidden state of
    transformers 4.51.3's Qwen3Model on the same weights and batch (≤ 1e-9,
    float64; real tokens only). That transformers runs in a process of its
    own (tools/transformers_reference.py qwen3-forward)."""
    save_file({**{"w." + k: v.contiguous() for k, v in w.items()}, "ids": ids, "mask4": mask4.contiguous()},
              f"{d}/qwen3_in.safetensors")
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transformers_reference.py")
    subprocess.run([sys.executable, tool, "qwen3-forward", d], check=True)
    want = load_file(f"{d}/qwen3_out.safetensors")["hidden"]
    got, _ = manual_decoder(cfg, w, ids, mask4)
    diff = (want - got)[real].abs().max().item()
    if diff > 1e-9:
        sys.exit(f"{d}: hand-written Qwen3 differs from transformers' Qwen3Model by {diff:g}")


def run(d):
    cfg, job, w = load(d)
    ids = torch.tensor(job["ids"], dtype=torch.long)
    mask = torch.tensor(job["mask"], dtype=DT)
    N, T = ids.shape
    causal = job["causal"]
    eff = effective(w, job.get("lora"), keep=lambda k: not k.startswith("pooling."))
    mt = cfg["model_type"]
    if mt == "qwen3":
        with torch.no_grad():  # the hand-written model against transformers' own Qwen3Model
            check_qwen3(d, {k: v.detach() for k, v in eff.items()}, cfg, ids, additive_mask(mask, causal), mask.bool())
        x, states = manual_decoder(cfg, eff, ids, additive_mask(mask, causal))
    else:
        cls, ccls = (Qwen2Model, Qwen2Config) if mt == "qwen2" else (LlamaModel, LlamaConfig)
        net = cls(hf_config(cfg, ccls)).to(DT).eval()
        am = mask.long() if causal else additive_mask(mask, causal)
        out = functional_call(net, eff, args=(), kwargs={"input_ids": ids, "attention_mask": am, "output_hidden_states": True})
        x, states = out.last_hidden_state, list(out.hidden_states[1:])

    lens = mask.sum(1).long()
    pool = job["pooling"]
    if pool == "mean":
        e = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    elif pool == "lasttoken":
        e = x[torch.arange(N), lens - 1]
    else:
        rows = []
        for i in range(N):
            if pool == "latent":
                rows.append(x[i, : lens[i]])
            else:  # multilayer: each layer's last-token state + the layer weights
                rows.append(torch.stack([h[i, lens[i] - 1] for h in states]) + w["pooling.layer_weights"])
        e = torch.stack([head(w, r, job["head"]["heads"]) for r in rows])
    Q, G = job["Q"], job["G"]
    qe, de = F.normalize(e[:Q], dim=-1), F.normalize(e[Q:], dim=-1)
    s = qe @ de.T / job["temperature"]
    loss = F.cross_entropy(s, torch.arange(Q) * G)  # in-batch negatives
    if job.get("distill_weight", 0) > 0:
        own = s.view(Q, Q, G)[torch.arange(Q), torch.arange(Q)]
        t = torch.tensor(job["teacher"], dtype=DT).view(Q, G) / job["teacher_temperature"]
        kl = F.kl_div(own.log_softmax(-1), t.log_softmax(-1), log_target=True, reduction="batchmean")
        loss = loss + job["distill_weight"] * kl
    loss.backward()
    out = {"loss": loss.detach().reshape(1).float()}
    for k in sorted(job["trainable"]):
        g = w[k].grad
        out[k] = (g if g is not None else torch.zeros_like(w[k])).float().contiguous()
    save_file(out, f"{d}/grads.safetensors")


if __name__ == "__main__":
    torch.manual_seed(0)
    for d in sys.argv[1:]:
        run(d)
