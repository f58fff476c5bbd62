#!/usr/bin/env python3
"""PyTorch reference for AutoRegEmbed (paper 001) as anna trains it
(package train/technique/autoregembed).

For each DIR given, reads what the Go test wrote:
  config.json          anna's model.Config of the tiny decoder
  enc.safetensors      the trainable encoder E (LlamaModel state-dict names,
                       LoRA factors as peft names them) and the memory
                       tokens "autoregembed.memory" (k×C)
  ref.safetensors      stage 2: the reference encoder (E as stage 2 began)
                       and its memory tokens
  dec.safetensors      the frozen decoder D (with lm_head.weight when untied)
  job.json             the step (token ids and mask of Q queries then Q·G
                       documents, EOS appended), templates, stage, k, β, τ,
                       LoRA, the trainable names
runs the method with autograd in float64 and writes DIR/grads.safetensors:
"loss" (shape [1]) and the gradient of every trainable tensor.

The method, written from the paper (and its released code) independently of
the Go side:
  encoder input  = prefix + text (its final EOS dropped) + instruction, as
                   token embeddings of E, then the k memory-token vectors;
                   E is transformers' LlamaModel over inputs_embeds; the
                   compressed vectors are the memory positions' last hidden
                   states;
  decoder input  = the k compressed vectors, then D's embeddings of the
                   target's tokens; D is transformers' LlamaForCausalLM over
                   inputs_embeds (frozen weights: torch tensors without
                   grad); log p(d|e) sums log_softmax(logits) of the target
                   tokens and EOS, each predicted from the row before it.
  stage 1        = −Σ log p(d+|e_q) / Σ |d+| (token-mean cross-entropy);
  stage 2        = Eq. 2: S1 = −σ(β|lp(d+|e_q) − lp(d+|e_d+)|),
                   S2_j = −σ(β[(lp(d+|e_q) − lp_ref(d+|e_q)) − (lp(d−_j|e_q) − lp_ref(d−_j|e_q))]),
                   loss = mean CE over [S1/τ, S2_j/τ] with class 0.

Usage: tools/autoregembed_torch_ref.py DIR [DIR...]
"""
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch.func import functional_call
from transformers import LlamaForCausalLM, LlamaModel


from decoder_ref_common import DT, additive_mask, effective, hf_config, load
MEM = "autoregembed.memory"


def pad(rows):
    """Right-pads a list of [L_i, C] tensors: [N, T, C] and the [N, T] mask."""
    T = max(r.shape[0] for r in rows)
    C = rows[0].shape[1]
    x = torch.zeros(len(rows), T, C, dtype=DT)
    m = torch.zeros(len(rows), T, dtype=DT)
    for i, r in enumerate(rows):
        x[i, : r.shape[0]] = r
        m[i, : r.shape[0]] = 1
    return x, m


def compress(cfg, w, memory, prefix, texts, instrs, causal):
    """The k compressed vectors of each prefix + text + instruction: [N, k, C]."""
    k = memory.shape[0]
    E = w["embed_tokens.weight"]
    rows = [torch.cat([E[torch.tensor(prefix + t + ins, dtype=torch.long)], memory]) for t, ins in zip(texts, instrs)]
    x, m = pad(rows)
    net = LlamaModel(hf_config(cfg)).to(DT).eval()
    am = m.long() if causal else additive_mask(m, causal)
    h = functional_call(net, w, args=(), kwargs={"inputs_embeds": x, "attention_mask": am}).last_hidden_state
    lens = m.sum(1).long()
    return torch.stack([h[i, lens[i] - k: lens[i]] for i in range(len(rows))])


def log_likelihoods(cfg, dec, e, targets, eos):
    """log p(target + EOS | e) under the frozen decoder, and the counts."""
    k = e.shape[1]
    E = dec["embed_tokens.weight"]
    rows = [torch.cat([e[i], E[torch.tensor(d, dtype=torch.long)]]) for i, d in enumerate(targets)]
    x, m = pad(rows)
    w = {"model." + n: v for n, v in dec.items() if n != "lm_head.weight"}
    w["lm_head.weight"] = dec.get("lm_head.weight", E)
    net = LlamaForCausalLM(hf_config(cfg)).to(DT).eval()
    logits = functional_call(net, w, args=(), kwargs={"inputs_embeds": x, "attention_mask": m.long()}).logits
    logp = logits.log_softmax(-1)
    lps, counts = [], []
    for i, d in enumerate(targets):
        tg = torch.tensor(d + [eos], dtype=torch.long)
        pos = torch.arange(k - 1, k - 1 + len(tg))
        lps.append(logp[i, pos, tg].sum())
        counts.append(len(tg))
    return torch.stack(lps), counts


def run(d):
    cfg, job, enc = load(d, "enc.safetensors", "job.json")
    dec = {k: v.to(DT) for k, v in load_file(f"{d}/dec.safetensors").items()}
    Q, G, eos = job["Q"], job["G"], job["eos"]
    texts = []
    for ids, mask in zip(job["ids"], job["mask"]):
        t = ids[: int(sum(mask))]
        if t and t[-1] == eos:
            t = t[:-1]
        texts.append(t)
    queries, docs = texts[:Q], texts[Q:]
    prefix, qi, di, causal = job["prefix"], job["query_instruction"], job["doc_instruction"], job["causal"]
    eff = effective(enc, job.get("lora"), keep=lambda k: k != MEM)
    if job["stage"] == 1:
        e = compress(cfg, eff, enc[MEM], prefix, queries, [qi] * Q, causal)
        lp, counts = log_likelihoods(cfg, dec, e, [docs[i * G] for i in range(Q)], eos)
        loss = -lp.sum() / sum(counts)
    else:
        beta, tau = job["beta"], job["tau"]
        with torch.no_grad():
            ref = {k: v.to(DT) for k, v in load_file(f"{d}/ref.safetensors").items()}
            er = compress(cfg, {k: v for k, v in ref.items() if k != MEM}, ref[MEM], prefix, queries, [qi] * Q, causal)
            lref, _ = log_likelihoods(cfg, dec, er.repeat_interleave(G, 0), docs, eos)
            lref = lref.view(Q, G)
        eq = compress(cfg, eff, enc[MEM], prefix, queries, [qi] * Q, causal)
        es = compress(cfg, eff, enc[MEM], prefix, [docs[i * G] for i in range(Q)], [di] * Q, causal)
        lq, _ = log_likelihoods(cfg, dec, eq.repeat_interleave(G, 0), docs, eos)
        lq = lq.view(Q, G)
        ls, _ = log_likelihoods(cfg, dec, es, [docs[i * G] for i in range(Q)], eos)
        s1 = -torch.sigmoid(beta * (lq[:, 0] - ls).abs())
        s2 = -torch.sigmoid(beta * ((lq[:, :1] - lref[:, :1]) - (lq[:, 1:] - lref[:, 1:])))
        z = torch.cat([s1[:, None], s2], 1) / tau
        loss = F.cross_entropy(z, torch.zeros(Q, dtype=torch.long))
    loss.backward()
    out = {"loss": loss.detach().reshape(1).float()}
    for k in sorted(job["trainable"]):
        g = enc[k].grad
        out[k] = (g if g is not None else torch.zeros_like(enc[k])).float().contiguous()
    save_file(out, f"{d}/grads.safetensors")


if __name__ == "__main__":
    torch.manual_seed(0)
    for d in sys.argv[1:]:
        run(d)
