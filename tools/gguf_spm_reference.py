#!/usr/bin/env python3
"""Reference for model/gguf's SentencePiece (tokenizer.ggml.model "llama")
tokenizers: GGUF files written by gguf-py (llama.cpp's gguf package) and
tokenised by the tokenizer transformers builds from them
(GGUFLlamaConverter, through AutoTokenizer.from_pretrained(gguf_file=...)).

  gguf_spm_reference.py write SPEC OUT   write the GGUF file OUT (vocabulary
                                only, no tensors) from the JSON object SPEC:
                                "tokens", optional "scores", "token_types",
                                "merges", and "kv": {key: value} for
                                tokenizer.ggml.* scalars (bool, int as uint32,
                                str)
  gguf_spm_reference.py tokens IN OUT GGUF...   IN is a JSON object with
                                "texts" and "decode" (lists of ids). For each
                                GGUF, for each text: "ids" (no special
                                tokens), "special" (with them), "decoded"
                                (decode of "special"), "skipped" (decode
                                skipping special tokens); "pairs": ids of
                                (texts[i], texts[i+1]) for the first 50 i;
                                "decodes": each list of "decode" decoded,
                                then decoded skipping special tokens;
                                "tokenizer": the tokenizer.json it runs. OUT is
                                a JSON list, one object per GGUF
"""
import json
import os
import sys


def write(spec_path, out):
    import gguf

    spec = json.load(open(spec_path))
    w = gguf.GGUFWriter(out, "llama")
    w.add_name("anna-spm-test")
    w.add_tokenizer_model("llama")
    w.add_token_list(spec["tokens"])
    if "scores" in spec:
        w.add_token_scores([float(x) for x in spec["scores"]])  # JSON 0 is an int
    if "token_types" in spec:
        w.add_token_types(spec["token_types"])
    if "merges" in spec:
        w.add_token_merges(spec["merges"])
    for k, v in spec.get("kv", {}).items():
        if isinstance(v, bool):
            w.add_bool(k, v)
        elif isinstance(v, int):
            w.add_uint32(k, v)
        elif isinstance(v, str):
            w.add_string(k, v)
        else:
            sys.exit(f"kv {k}: unsupported value {v!r}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tokens(inp, out, paths):
    from transformers import AutoTokenizer
    from transformers.utils import logging

    logging.set_verbosity_error()
    inp = json.load(open(inp))
    texts, lists = inp["texts"], inp["decode"]
    res = []
    for path in map(os.path.abspath, paths):
        tok = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
        special = tok(texts)["input_ids"]
        res.append({
            "ids": tok(texts, add_special_tokens=False)["input_ids"],
            "special": special,
            # _decode: decode less its per-id to_py_obj conversion (90 s).
            "decoded": [tok._decode(s) for s in special],
            "skipped": [tok._decode(s, skip_special_tokens=True) for s in special],
            "pairs": [tok(texts[i], texts[i + 1])["input_ids"] for i in range(min(50, len(texts) - 1))],
            "decodes": [[tok._decode(ids), tok._decode(ids, skip_special_tokens=True)] for ids in lists],
            "tokenizer": json.loads(tok.backend_tokenizer.to_str()),
        })
    json.dump(res, open(out, "w"))


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "tokens":
        tokens(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        sys.exit(__doc__)
