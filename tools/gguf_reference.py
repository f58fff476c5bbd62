#!/usr/bin/env python3
"""Reference dequantization by gguf-py (llama.cpp's gguf package) for
model/gguf's TestGGUFDequantizeMatchesGGUFPy.

  gguf_reference.py blocks DIR      for each DIR/<TYPE>.bin (whole blocks of
                                    that type) write DIR/<TYPE>.f32, the values
                                    as little-endian float32
  gguf_reference.py file GGUF OUT   write OUT: JSON {name: {"type", "shape",
                                    "sha256"}} with the sha256 of every tensor's
                                    dequantized float32 bytes
  gguf_reference.py tokens GGUF IN OUT   token ids (no special tokens) of the
                                    JSON list of texts IN by the tokenizer
                                    transformers builds from GGUF, to OUT
  gguf_reference.py generate GGUF IN OUT   for each chat of IN ({"chats":
                                    [[{"role", "content"}...]...], "max_new"})
                                    the prompt ids of the tokenizer's chat
                                    template (generation prompt added) and the
                                    model's greedy new tokens, float32, to OUT
"""
import hashlib
import json
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGML_QUANT_SIZES
from gguf.quants import dequantize


def blocks(d):
    for f in sorted(os.listdir(d)):
        if not f.endswith(".bin"):
            continue
        qtype = GGMLQuantizationType[f[:-4]]
        _, type_size = GGML_QUANT_SIZES[qtype]
        raw = np.fromfile(os.path.join(d, f), dtype=np.uint8)
        if qtype in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
            vals = dequantize(raw, qtype)
        else:
            vals = dequantize(raw.reshape(-1, type_size), qtype)
        np.asarray(vals, dtype="<f4").reshape(-1).tofile(os.path.join(d, f[:-4] + ".f32"))


def file(path, out):
    r = GGUFReader(path)
    res = {}
    for t in r.tensors:
        v = np.asarray(dequantize(t.data, t.tensor_type), dtype="<f4")
        res[t.name] = {
            "type": t.tensor_type.name,
            "shape": [int(x) for x in t.shape],
            "sha256": hashlib.sha256(v.reshape(-1).tobytes()).hexdigest(),
        }
    with open(out, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)


def tokens(path, inp, out):
    """Token ids (no special tokens) of each text in the JSON list inp, by
    the tokenizer transformers builds from the GGUF file."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
    texts = json.load(open(inp))
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    json.dump(ids, open(out, "w"))


def generate(path, inp, out):
    """Prompt ids and greedy continuations by transformers' GGUF loading."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    d, f = os.path.dirname(path), os.path.basename(path)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32)
    # A GGUF file without output.weight ties the LM head to the token
    # embedding (llama.cpp's reading, SmolLM2's config); transformers 4.46
    # does not take tie_word_embeddings from GGUF metadata and leaves such a
    # head randomly initialised, so tie it here.
    if "output.weight" not in {t.name for t in GGUFReader(path).tensors}:
        model.lm_head.weight = model.model.embed_tokens.weight
    model.eval()
    req = json.load(open(inp))
    res = []
    with torch.no_grad():
        for chat in req["chats"]:
            ids = tok.apply_chat_template(chat, add_generation_prompt=True)
            gen = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 max_new_tokens=req["max_new"], do_sample=False, pad_token_id=tok.eos_token_id)
            res.append({"prompt": list(ids), "new": gen[0][len(ids):].tolist(), "eos": tok.eos_token_id})
    json.dump(res, open(out, "w"))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    if sys.argv[1] == "blocks":
        blocks(sys.argv[2])
    elif sys.argv[1] == "file":
        file(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "tokens":
        tokens(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "generate":
        generate(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
