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



if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    if sys.argv[1] == "blocks":
        blocks(sys.argv[2])
    elif sys.argv[1] == "file":
        file(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "tokens":
        tokens(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
