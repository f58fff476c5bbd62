#!/usr/bin/env python3
"""PyTorch reference for anna's Causal2Vec technique (package
train/technique/causal2vec, paper 004).

For each DIR given, reads what the Go test wrote: config.json (anna's
model.Config of a tiny Llama), model.safetensors (the decoder named as
transformers' LlamaModel state dict, LoRA factors as peft names them, and
the Causal2Vec MLP as causal2vec.mlp.{0,2}.{weight,bias}) and batch.json
(token ids and mask of the Q queries and Q·G documents without the
contextual token, each sequence's contextual-token position, the encoder's
vectors, the objective). It runs the technique with autograd in float64:

  C   = GELU(h·W1ᵀ (+ b1))·W2ᵀ (+ b2)        (exact erf GELU, nn.GELU())
  x   = [tokens before pos; C; tokens from pos]  as inputs_embeds, mask + 1
  H   = transformers' LlamaModel(inputs_embeds=x), causal (2-D mask)
  e   = [H[C]; H[EOS]]
  loss = InfoNCE over cos(e_q, e_d)/τ with in-batch negatives
         + w · KL(teacher ‖ student) over each query's own group

and writes DIR/grads.safetensors: "loss" (shape [1]), "encoder_vecs" (the
gradient of the encoder's vectors h) and the gradient of every trainable
tensor under its own name. One process serves every DIR.

Usage: tools/causal2vec_torch_ref.py DIR [DIR...]
"""
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch.func import functional_call
from transformers import LlamaModel


from decoder_ref_common import DT, effective, hf_config, load


def run(d):
    cfg, job, w = load(d)
    ids = torch.tensor(job["ids"], dtype=torch.long)
    mask = torch.tensor(job["mask"], dtype=DT)
    pos = job["pos"]
    h = torch.tensor(job["encoder"], dtype=DT, requires_grad=True)
    N, T = ids.shape
    lens = mask.sum(1).long()

    # The contextual token (Eq. 1).
    u = h @ w["causal2vec.mlp.0.weight"].T
    if "causal2vec.mlp.0.bias" in w:
        u = u + w["causal2vec.mlp.0.bias"]
    c = F.gelu(u) @ w["causal2vec.mlp.2.weight"].T
    if "causal2vec.mlp.2.bias" in w:
        c = c + w["causal2vec.mlp.2.bias"]

    # [I; C; T; EOS] (Eq. 2): C inserted after pos[n] tokens.
    emb = w["embed_tokens.weight"][ids]
    rows = [torch.cat([emb[n, : pos[n]], c[n : n + 1], emb[n, pos[n] :]]) for n in range(N)]
    x = torch.stack(rows)
    am = torch.zeros(N, T + 1, dtype=torch.long)
    for n in range(N):
        am[n, : lens[n] + 1] = 1

    net = LlamaModel(hf_config(cfg)).to(DT).eval()
    eff = effective(w, job.get("lora"), keep=lambda k: not k.startswith("causal2vec."))
    assert job["causal"], "the reference runs the pretrained causal mask only"
    out = functional_call(net, eff, args=(), kwargs={"inputs_embeds": x, "attention_mask": am})
    H = out.last_hidden_state
    idx = torch.arange(N)
    e = torch.cat([H[idx, torch.tensor(pos)], H[idx, lens]], dim=-1)  # [h_C; h_EOS], EOS at lens (shifted by C)

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
    res = {"loss": loss.detach().reshape(1).float(), "encoder_vecs": h.grad.float().contiguous()}
    for k in sorted(job["trainable"]):
        g = w[k].grad
        res[k] = (g if g is not None else torch.zeros_like(w[k])).float().contiguous()
    save_file(res, f"{d}/grads.safetensors")


if __name__ == "__main__":
    torch.manual_seed(0)
    for d in sys.argv[1:]:
        run(d)
