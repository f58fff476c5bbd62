#!/usr/bin/env python3
"""PyTorch reference for anna's Go trainer (package train).

For each DIR given, builds the same BERT the Go test wrote (config.json +
model.safetensors in DIR, Hugging Face names), runs the batch and objective
in DIR/batch.json with autograd in float64, and writes DIR/grads.safetensors:
"loss" (shape [1]) and the gradient of every trainable tensor under its own
name. One process serves every DIR. The test reads the outputs from its
golden file (train/bert/testdata); `make goldens` reruns this to remake it.

The model is written out in plain torch (no transformers) following
transformers' BertModel: post-LN encoder layers, additive attention mask of
the dtype's minimum, erf GELU, and BertForSequenceClassification's pooler +
classifier. Usage: tools/torch_ref.py DIR [DIR...]
"""
import json
import math
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file


def encoder(w, cfg, lora=None):
    """Returns (encode, lin): encode(ids, types, mask) -> last hidden state."""
    pre = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""
    C = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    hs = C // H
    eps = cfg.get("layer_norm_eps", 1e-12)
    act = cfg.get("hidden_act", "gelu")

    def weight(name):
        W = w[name + ".weight"]
        if lora and (name + ".lora_A.weight") in w:
            W = W + (lora["alpha"] / lora["rank"]) * (w[name + ".lora_B.weight"] @ w[name + ".lora_A.weight"])
        return W

    def lin(x, name):
        return x @ weight(name).T + w[name + ".bias"]

    def ln(x, name):
        return F.layer_norm(x, (C,), w[name + ".weight"], w[name + ".bias"], eps)

    def actf(x):
        if act == "gelu":
            return F.gelu(x)
        if act in ("gelu_new", "gelu_pytorch_tanh"):
            return F.gelu(x, approximate="tanh")
        return F.relu(x)

    def encode(ids, types, mask):
        N, T = ids.shape
        dt = mask.dtype
        pos = torch.arange(T, device=ids.device)
        x = w[pre + "embeddings.word_embeddings.weight"][ids] + w[pre + "embeddings.position_embeddings.weight"][pos][None] \
            + w[pre + "embeddings.token_type_embeddings.weight"][types]
        x = ln(x, pre + "embeddings.LayerNorm")
        ext = (1.0 - mask)[:, None, None, :] * torch.finfo(dt).min
        for l in range(cfg["num_hidden_layers"]):
            p = f"{pre}encoder.layer.{l}."
            q = lin(x, p + "attention.self.query").view(N, T, H, hs).transpose(1, 2)
            k = lin(x, p + "attention.self.key").view(N, T, H, hs).transpose(1, 2)
            v = lin(x, p + "attention.self.value").view(N, T, H, hs).transpose(1, 2)
            s = q @ k.transpose(-1, -2) / math.sqrt(hs) + ext
            ctx = (s.softmax(-1) @ v).transpose(1, 2).reshape(N, T, C)
            x = ln(lin(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            f = lin(actf(lin(x, p + "intermediate.dense")), p + "output.dense")
            x = ln(f + x, p + "output.LayerNorm")
        return x

    return encode, lin, pre


def main(d):
    cfg = json.load(open(f"{d}/config.json"))
    job = json.load(open(f"{d}/batch.json"))
    dt = torch.float64
    w = {k: v.to(dt) for k, v in load_file(f"{d}/model.safetensors").items()}
    lora = job.get("lora")
    trainable = set(job["trainable"])
    for k, v in w.items():
        v.requires_grad_(k in trainable)
    encode, lin, pre = encoder(w, cfg, lora)
    ids = torch.tensor(job["ids"], dtype=torch.long)
    types = torch.tensor(job["types"], dtype=torch.long)
    mask = torch.tensor(job["mask"], dtype=dt)
    N, T = ids.shape
    x = encode(ids, types, mask)

    obj = job["objective"]
    if obj == "contrastive":
        pool = job["pooling"]
        if pool == "mean":
            e = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1e-9)
        elif pool == "cls":
            e = x[:, 0]
        else:
            last = mask.sum(1).long() - 1
            e = x[torch.arange(N), last]
        Q, G = job["Q"], job["G"]
        qe, de = F.normalize(e[:Q], dim=-1), F.normalize(e[Q:], dim=-1)
        s = qe @ de.T / job["temperature"]
        target = torch.arange(Q) * G
        if job["in_batch"]:
            loss = F.cross_entropy(s, target)
        else:
            own = s.view(Q, Q, G)[torch.arange(Q), torch.arange(Q)]
            loss = F.cross_entropy(own, torch.zeros(Q, dtype=torch.long))
        if job.get("distill_weight", 0) > 0:
            own = s.view(Q, Q, G)[torch.arange(Q), torch.arange(Q)]
            t = torch.tensor(job["teacher"], dtype=dt).view(Q, G) / job["teacher_temperature"]
            kl = F.kl_div(own.log_softmax(-1), t.log_softmax(-1), log_target=True, reduction="batchmean")
            loss = loss + job["distill_weight"] * kl
    else:
        h = torch.tanh(lin(x[:, 0], pre + "pooler.dense"))
        logits = lin(h, "classifier").squeeze(-1)
        Q, G = job["Q"], job["G"]
        if obj == "bce":
            loss = F.binary_cross_entropy_with_logits(logits, torch.tensor(job["labels"], dtype=dt))
        else:
            loss = F.cross_entropy(logits.view(Q, G), torch.zeros(Q, dtype=torch.long))
        if job.get("distill_weight", 0) > 0:
            t = torch.tensor(job["teacher"], dtype=dt) / job["teacher_temperature"]
            if obj == "bce":
                # the teacher's scores are log-odds: BCE against its probabilities
                term = F.binary_cross_entropy_with_logits(logits, torch.sigmoid(t))
            else:
                term = F.kl_div(logits.view(Q, G).log_softmax(-1), t.view(Q, G).log_softmax(-1),
                                log_target=True, reduction="batchmean")
            loss = loss + job["distill_weight"] * term

    loss.backward()
    out = {"loss": loss.detach().reshape(1).float()}
    for k in sorted(trainable):
        g = w[k].grad
        out[k] = (g if g is not None else torch.zeros_like(w[k])).float().contiguous()
    save_file(out, f"{d}/grads.safetensors")


if __name__ == "__main__":
    for d in sys.argv[1:]:
        main(d)
