#!/usr/bin/env python3
"""References from transformers for model/onnx's architecture tests.

  transformers_reference.py tiny ARCH SEED DIR
      Builds a tiny random ARCH model (llama, mistral, qwen2, xlm-roberta:
      with its classification head, also DIR/logits.f32) with transformers,
      saves DIR/config.json and DIR/model.safetensors, and runs it on a
      right-padded batch (DIR/ids.json: {"ids": [[...]], "mask": [[...]]}),
      writing DIR/hidden.f32: last_hidden_state, float32 little-endian.

  transformers_reference.py gguf GGUF DIR
      Loads GGUF with transformers (dequantized, float32), runs each id list
      of DIR/ids.json alone (no padding) and writes DIR/hidden.f32, the
      hidden states concatenated.
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


def gguf(path, d):
    from transformers import AutoModel

    m = AutoModel.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path), torch_dtype=torch.float32).eval()
    inp = json.load(open(os.path.join(d, "ids.json")))
    out = []
    with torch.no_grad():
        for ids in inp["ids"]:
            out.append(m(input_ids=torch.tensor([ids])).last_hidden_state[0].numpy())
    np.concatenate(out).astype("<f4").tofile(os.path.join(d, "hidden.f32"))


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "tiny":
        tiny(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif len(sys.argv) >= 4 and sys.argv[1] == "gguf":
        gguf(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
