#!/usr/bin/env python3
"""PyTorch reference for paper 000's stage I (Anchor, package
train/technique/anchor): the bidirectional reconstruction loss and its
gradients, with autograd in float64.

For each DIR given, reads the tiny decoder the Go test wrote (config.json as
anna's model.Config marshals it, model.safetensors named as transformers'
LlamaModel state dict plus, untied, a frozen lm_head.weight; LoRA factors as
peft names them) and DIR/batch.json (the step: ids and mask of Q queries then
Q·G documents, right-padded, each ending in its EOS; alpha; the trainable
names), and writes DIR/grads.safetensors: "loss", "q2d", "d2q" (shape [1])
and the gradient of every trainable tensor under its own name.

The model is transformers' own LlamaForCausalLM / Qwen2ForCausalLM (4.46.3,
eager attention, causal) run through torch.func.functional_call, each
LoRA-adapted weight replaced by W + alpha/r · B·A, and with
tie_word_embeddings the LM head is the input embedding itself (SmolLM2).
The loss is written as the authors' training code writes it
(LUMIA-Group/Anchor-Embedding, run_stage_I.py), not as the Go side does:

  e_X     = last_hidden_state at X's EOS, over the whole step batch
  EBQ2D:  inputs_embeds = [e_Q, embed_tokens(D) with its EOS], mask [1, mask_D]
          labels = [-100, D's ids with the EOS and padding at -100]
          L_Q2D = cross_entropy(logits[:, :-1], labels[:, 1:], ignore -100)
  EBD2Q:  the same with Q and D swapped
  L = alpha·L_Q2D + (1 − alpha)·L_D2Q

so the Go side's shorter generation batch (no EOS input, the sub-batch of
queries and positives only) is checked against the full formulation.

Usage: tools/anchor_torch_ref.py DIR [DIR...]
"""
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch.func import functional_call
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM


from decoder_ref_common import DT, effective, hf_config, load


def run(d):
    cfg, job, w = load(d)
    ids = torch.tensor(job["ids"], dtype=torch.long)
    mask = torch.tensor(job["mask"], dtype=torch.long)
    N, T = ids.shape
    Q, G, alpha = job["Q"], job["G"], job["alpha"]
    V = cfg["vocab_size"]

    cls, ccls = (Qwen2ForCausalLM, Qwen2Config) if cfg["model_type"] == "qwen2" else (LlamaForCausalLM, LlamaConfig)
    net = cls(hf_config(cfg, ccls, tie=bool(cfg.get("tie_word_embeddings")))).to(DT).eval()
    eff = effective(w, job.get("lora"))
    embed = eff["embed_tokens.weight"]
    params = {"model." + k: v for k, v in eff.items() if k != "lm_head.weight"}
    params["lm_head.weight"] = embed if cfg.get("tie_word_embeddings") else eff["lm_head.weight"]
    assert (net.lm_head.weight is net.model.embed_tokens.weight) == bool(cfg.get("tie_word_embeddings"))

    # e_X: the final hidden state (after the final norm) at each EOS.
    hs = functional_call(net, params, args=(), kwargs={"input_ids": ids, "attention_mask": mask, "output_hidden_states": True}).hidden_states
    lens = mask.sum(1)
    e = hs[-1][torch.arange(N), lens - 1]

    labels = ids.clone()
    labels[mask == 0] = -100
    labels[torch.arange(N), lens - 1] = -100  # the EOS is not reconstructed

    def reconstruct(src, tgt):
        n = len(src)
        inp = torch.cat([e[src].unsqueeze(1), embed[ids[tgt]]], dim=1)
        am = torch.cat([torch.ones(n, 1, dtype=torch.long), mask[tgt]], dim=1)
        logits = functional_call(net, params, args=(), kwargs={"inputs_embeds": inp, "attention_mask": am}).logits
        lab = torch.cat([torch.full((n, 1), -100, dtype=torch.long), labels[tgt]], dim=1)
        return F.cross_entropy(logits[:, :-1].reshape(-1, V), lab[:, 1:].reshape(-1), ignore_index=-100)

    queries = list(range(Q))
    positives = [Q + q * G for q in range(Q)]
    q2d = reconstruct(queries, positives)
    d2q = reconstruct(positives, queries)
    loss = alpha * q2d + (1 - alpha) * d2q
    loss.backward()
    out = {n: v.detach().reshape(1).float() for n, v in (("loss", loss), ("q2d", q2d), ("d2q", d2q))}
    for k in sorted(job["trainable"]):
        g = w[k].grad
        out[k] = (g if g is not None else torch.zeros_like(w[k])).float().contiguous()
    save_file(out, f"{d}/grads.safetensors")


if __name__ == "__main__":
    torch.manual_seed(0)
    for d in sys.argv[1:]:
        run(d)
