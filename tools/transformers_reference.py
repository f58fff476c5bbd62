#!/usr/bin/env python3
"""References from transformers for model/onnx's architecture tests.

  transformers_reference.py tiny ARCH SEED DIR
      Builds a tiny random ARCH model (llama, mistral, qwen2, qwen3, xlm-roberta:
      with its classification head, also DIR/logits.f32) with transformers,
      saves DIR/config.json and DIR/model.safetensors, and runs it on a
      right-padded batch (DIR/ids.json: {"ids": [[...]], "mask": [[...]]}),
      writing DIR/hidden.f32: last_hidden_state, float32 little-endian.

  transformers_reference.py tiny-lm ARCH SEED DIR
      As tiny, for ARCH llama (untied lm_head), qwen2 or qwen3 (tied) as
      ...ForCausalLM: also DIR/logits.f32, the language-model logits at
      each row's last real token, [batch, vocab].

  transformers_reference.py qwen3-forward DIR
      transformers' own Qwen3Model, in float64, on DIR/config.json and the
      weights, ids and additive 4-D mask in DIR/qwen3_in.safetensors
      ("w." + weight name, "ids", "mask4"); writes the last hidden state to
      DIR/qwen3_out.safetensors ("hidden"). tools/decoder_torch_ref.py checks
      its hand-written Qwen3 against it.

  Qwen3 runs in transformers 4.51.3 (tools/newer_transformers.py), every
  other architecture in the venv's 4.46.3: one process, one version.

  transformers_reference.py gguf GGUF DIR
      Loads GGUF with transformers (dequantized, float32), runs each id list
      of DIR/ids.json alone (no padding) and writes DIR/hidden.f32, the
      hidden states concatenated. With a "rerank" object in ids.json
      (prefix, body, suffix, labels, pairs, max_length), also lays each pair
      out as Qwen3-Reranker does with transformers' tokenizer and writes
      DIR/rerank_ids.json and DIR/rerank.f32 (the label logits at the last
      token, [pairs, labels]).
"""
import json
import os
import sys

import numpy as np
import torch


def tiny(arch, seed, d):
    from safetensors.torch import save_file
    from transformers import (LlamaConfig, LlamaModel, MistralConfig, MistralModel,
                              Qwen2Config, Qwen2Model, XLMRobertaConfig,
                              XLMRobertaForSequenceClassification)

    torch.manual_seed(seed)
    common = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=48, max_position_embeddings=64,
                  rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True)
    if arch == "llama":
        cfg, cls = LlamaConfig(**common), LlamaModel
    elif arch == "mistral":
        cfg, cls = MistralConfig(sliding_window=None, **common), MistralModel
    elif arch == "qwen2":
        cfg, cls = Qwen2Config(use_sliding_window=False, **common), Qwen2Model
    elif arch == "qwen3":
        # Per-head q/k RMSNorms, and a head width (12) that is not
        # hidden/heads (8), as in the released Qwen3 models.
        from transformers import Qwen3Config, Qwen3Model
        cfg, cls = Qwen3Config(use_sliding_window=False, head_dim=12, **common), Qwen3Model
    elif arch == "xlm-roberta":
        # The cross-encoder form: the encoder's hidden states and the
        # classification head's logit; pad id 1, positions from 2.
        cfg = XLMRobertaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=48, max_position_embeddings=66, type_vocab_size=1,
                               pad_token_id=1, layer_norm_eps=1e-5, num_labels=1)
        cls = XLMRobertaForSequenceClassification
    else:
        sys.exit(f"unknown arch {arch}")
    cfg._attn_implementation = "eager"
    m = cls(cfg).eval()
    with torch.no_grad():  # norms away from 1, so that they matter
        for n, p in m.named_parameters():
            if n.endswith("norm.weight") or n.endswith("LayerNorm.weight") or n.endswith(".bias"):
                p.add_(torch.randn_like(p) * 0.2)
    cfg.save_pretrained(d)
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, os.path.join(d, "model.safetensors"))
    inp = json.load(open(os.path.join(d, "ids.json")))
    ids, mask = torch.tensor(inp["ids"]), torch.tensor(inp["mask"])
    with torch.no_grad():
        if arch == "xlm-roberta":
            out = m(input_ids=ids, attention_mask=mask, output_hidden_states=True)
            h = out.hidden_states[-1]
            out.logits.numpy().astype("<f4").tofile(os.path.join(d, "logits.f32"))
        else:
            h = m(input_ids=ids, attention_mask=mask).last_hidden_state
    h.numpy().astype("<f4").tofile(os.path.join(d, "hidden.f32"))


def tiny_lm(arch, seed, d):
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    common = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=48, max_position_embeddings=64,
                  rms_norm_eps=1e-5, rope_theta=10000.0)
    if arch == "llama":
        cfg, cls = LlamaConfig(tie_word_embeddings=False, **common), LlamaForCausalLM
    elif arch == "qwen2":
        cfg, cls = Qwen2Config(use_sliding_window=False, tie_word_embeddings=True, **common), Qwen2ForCausalLM
    elif arch == "qwen3":  # Qwen3-Reranker's architecture
        from transformers import Qwen3Config, Qwen3ForCausalLM
        cfg, cls = Qwen3Config(use_sliding_window=False, tie_word_embeddings=True, head_dim=12, **common), Qwen3ForCausalLM
    else:
        sys.exit(f"unknown arch {arch}")
    cfg._attn_implementation = "eager"
    m = cls(cfg).eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if n.endswith("norm.weight") or n.endswith(".bias"):
                p.add_(torch.randn_like(p) * 0.2)
    cfg.save_pretrained(d)
    sd = {k: v.contiguous() for k, v in m.state_dict().items()}
    if cfg.tie_word_embeddings:
        del sd["lm_head.weight"]  # the same tensor as the embeddings
    save_file(sd, os.path.join(d, "model.safetensors"))
    inp = json.load(open(os.path.join(d, "ids.json")))
    ids, mask = torch.tensor(inp["ids"]), torch.tensor(inp["mask"])
    with torch.no_grad():
        out = m(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    last = mask.sum(1) - 1
    out.logits[torch.arange(len(ids)), last].numpy().astype("<f4").tofile(os.path.join(d, "logits.f32"))
    out.hidden_states[-1].numpy().astype("<f4").tofile(os.path.join(d, "hidden.f32"))


def gguf(path, d):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gguf import GGUFReader

    lm = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path), torch_dtype=torch.float32).eval()
    if not any(t.name == "output.weight" for t in GGUFReader(path).tensors):
        # llama.cpp reads a file without output.weight as tied; transformers
        # 4.46 leaves lm_head randomly initialised instead (it warns so).
        lm.lm_head.weight = lm.model.embed_tokens.weight
    inp = json.load(open(os.path.join(d, "ids.json")))
    out = []
    with torch.no_grad():
        for ids in inp["ids"]:
            out.append(lm.model(input_ids=torch.tensor([ids])).last_hidden_state[0].numpy())
    np.concatenate(out).astype("<f4").tofile(os.path.join(d, "hidden.f32"))
    rr = inp.get("rerank")
    if not rr:
        return
    # Qwen3-Reranker's formatting: prefix and suffix tokens around the body,
    # which is tokenised whole and cut from the right to fit max_length.
    tok = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
    pre = tok.encode(rr["prefix"], add_special_tokens=False)
    suf = tok.encode(rr["suffix"], add_special_tokens=False)
    labels = [tok.convert_tokens_to_ids(l) for l in rr["labels"]]
    all_ids, logits = [], []
    with torch.no_grad():
        for q, doc in rr["pairs"]:
            body = rr["body"].replace("{query}", q).replace("{document}", doc)
            b = tok(body, add_special_tokens=False, truncation=True, max_length=rr["max_length"] - len(pre) - len(suf))["input_ids"]
            ids = pre + b + suf
            all_ids.append(ids)
            logits.append(lm(input_ids=torch.tensor([ids])).logits[0, -1, labels].numpy())
    json.dump({"ids": all_ids, "labels": labels}, open(os.path.join(d, "rerank_ids.json"), "w"))
    np.stack(logits).astype("<f4").tofile(os.path.join(d, "rerank.f32"))


def qwen3_forward(d):
    from safetensors.torch import load_file, save_file
    from torch.func import functional_call
    from transformers import Qwen3Config, Qwen3Model

    c = json.load(open(os.path.join(d, "config.json")))
    cfg = Qwen3Config(
        vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], intermediate_size=c["intermediate_size"],
        num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
        num_key_value_heads=c.get("num_key_value_heads") or c["num_attention_heads"], head_dim=c.get("head_dim"),
        max_position_embeddings=c["max_position_embeddings"], rms_norm_eps=c["rms_norm_eps"],
        rope_theta=c["rope_theta"], hidden_act="silu", tie_word_embeddings=False, use_sliding_window=False,
        attn_implementation="eager")
    inp = load_file(os.path.join(d, "qwen3_in.safetensors"))
    w = {k[2:]: v for k, v in inp.items() if k.startswith("w.")}
    net = Qwen3Model(cfg).to(torch.float64).eval()
    with torch.no_grad():
        h = functional_call(net, w, args=(), kwargs={"input_ids": inp["ids"], "attention_mask": inp["mask4"]}).last_hidden_state
    save_file({"hidden": h.contiguous()}, os.path.join(d, "qwen3_out.safetensors"))


if __name__ == "__main__":
    if ("qwen3" in sys.argv[1:3]) or (len(sys.argv) >= 2 and sys.argv[1] == "qwen3-forward"):
        import newer_transformers
        newer_transformers.use()
    if len(sys.argv) >= 3 and sys.argv[1] == "qwen3-forward":
        qwen3_forward(sys.argv[2])
    elif len(sys.argv) >= 5 and sys.argv[1] == "tiny":
        tiny(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif len(sys.argv) >= 5 and sys.argv[1] == "tiny-lm":
        tiny_lm(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif len(sys.argv) >= 4 and sys.argv[1] == "gguf":
        gguf(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
