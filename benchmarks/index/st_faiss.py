#!/usr/bin/env python3
"""The indexing reference for BenchmarkIndexSciFact: what sentence-transformers
does for all-MiniLM-L6-v2 (BertModel, mean pooling over the attention mask,
L2 normalisation, texts sorted by length and embedded batch by batch,
truncated to 256 tokens) with transformers + torch on the CPU, then a FAISS
HNSW graph (M 16, efConstruction 200, inner product) over the vectors: the
same model weights (the fp16 safetensors make setup keeps), the same
tokenizer.json and the same texts as anna's run.

  st_faiss.py SRC_DIR TEXTS_JSON THREADS BATCH

Prints JSON: docs, seconds (embedding + graph), embed_seconds, graph_seconds.
"""
import json
import sys
import time

import faiss
import numpy as np
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer
from transformers import BertConfig, BertModel


def main():
    src, texts_path, threads, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    faiss.omp_set_num_threads(threads)
    texts = json.load(open(texts_path))
    cfg = BertConfig.from_json_file(f"{src}/config.json")
    model = BertModel(cfg, add_pooling_layer=False)
    sd = {k.removeprefix("bert."): v.float() for k, v in load_file(f"{src}/model.fp16.safetensors").items()
          if not k.startswith("pooler.") and k != "embeddings.position_ids"}  # unused by mean pooling; a buffer
    model.load_state_dict(sd, strict=True)
    model.eval()
    tok = Tokenizer.from_file(f"{src}/tokenizer.json")
    tok.enable_truncation(256)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")

    t0 = time.perf_counter()
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # as sentence-transformers' encode
    out = np.zeros((len(texts), cfg.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            enc = tok.encode_batch([texts[i] for i in idx])
            ids = torch.tensor([e.ids for e in enc])
            mask = torch.tensor([e.attention_mask for e in enc])
            h = model(input_ids=ids, attention_mask=mask).last_hidden_state
            m = mask.unsqueeze(-1).float()
            v = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            v = torch.nn.functional.normalize(v, dim=-1)
            out[idx] = v.numpy()
    t1 = time.perf_counter()
    index = faiss.IndexHNSWFlat(cfg.hidden_size, 16, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 200
    index.add(out)
    t2 = time.perf_counter()
    json.dump({"docs": len(texts), "seconds": t2 - t0, "embed_seconds": t1 - t0, "graph_seconds": t2 - t1}, sys.stdout)


if __name__ == "__main__":
    main()
