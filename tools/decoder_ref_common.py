"""What the decoder references share (tools/decoder_torch_ref.py and the
papers' techniques: anchor_, causal2vec_, autoregembed_torch_ref.py): the
transformers config of an anna decoder config, the float64 weights of a job
with their trainable flags, LoRA pairs merged into their bases, and the
additive attention mask transformers takes as given."""
import json

import torch
from safetensors.torch import load_file
from transformers import LlamaConfig, Qwen2Config

DT = torch.float64


def hf_config(cfg, cls=LlamaConfig, tie=False):
    """cls (LlamaConfig or Qwen2Config) from anna's config.json dict; eager
    attention; head_dim where the config has one (LlamaConfig only: Qwen2's
    ignores it in transformers 4.46.3); tie ties the LM head."""
    kw = dict(
        vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"], intermediate_size=cfg["intermediate_size"],
        num_hidden_layers=cfg["num_hidden_layers"], num_attention_heads=cfg["num_attention_heads"],
        num_key_value_heads=cfg.get("num_key_value_heads") or cfg["num_attention_heads"],
        max_position_embeddings=cfg["max_position_embeddings"], rms_norm_eps=cfg["rms_norm_eps"],
        rope_theta=cfg["rope_theta"], hidden_act="silu", tie_word_embeddings=tie,
        attn_implementation="eager")
    if cls is LlamaConfig and cfg.get("head_dim"):
        kw["head_dim"] = cfg["head_dim"]
    if cls is Qwen2Config:
        kw["use_sliding_window"] = False
    return cls(**kw)


def load(d, weights="model.safetensors", job="batch.json"):
    """DIR's config.json and job as dicts, and the weights in float64, each
    requiring a gradient when the job lists it as trainable."""
    cfg = json.load(open(f"{d}/config.json"))
    j = json.load(open(f"{d}/{job}"))
    w = {k: v.to(DT) for k, v in load_file(f"{d}/{weights}").items()}
    trainable = set(j["trainable"])
    for k, v in w.items():
        v.requires_grad_(k in trainable)
    return cfg, j, w


def effective(w, lora, keep=lambda name: True):
    """The weights that keep accepts, every LoRA pair merged into its base
    (W + alpha/r · B·A) and the factors themselves left out."""
    out = {k: v for k, v in w.items() if ".lora_" not in k and keep(k)}
    if lora:
        s = lora["alpha"] / lora["rank"]
        for k in w:
            if k.endswith(".lora_A.weight"):
                base = k[: -len(".lora_A.weight")]
                out[base + ".weight"] = w[base + ".weight"] + s * (w[base + ".lora_B.weight"] @ w[k])
    return out


def additive_mask(mask, causal):
    """[N,1,T,T]: 0 where query i may see key j, the dtype's minimum elsewhere."""
    N, T = mask.shape
    ok = mask[:, None, None, :].bool().expand(N, 1, T, T)
    if causal:
        ok = ok & torch.tril(torch.ones(T, T, dtype=torch.bool))
    return torch.zeros(N, 1, T, T, dtype=DT).masked_fill(~ok, torch.finfo(DT).min)
