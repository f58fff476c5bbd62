"""Writes tiktoken's cl100k_base.tiktoken into a TIKTOKEN_CACHE_DIR, rebuilt
from the ranks npm's js-tiktoken ships (the file's download host is not
reachable from the test machines), so that langchain-openai's defaults
(which tokenize with tiktoken before calling the server) run offline.

usage: tiktoken_cache.py JS_TIKTOKEN_TGZ CACHE_DIR

The rebuilt file is checked against the sha256 tiktoken itself expects of
it (tiktoken_ext/openai_public.py); tiktoken checks it again on reading.
"""
import hashlib
import json
import os
import sys
import tarfile

URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


def main(tgz, cache_dir):
    with tarfile.open(tgz) as tf:
        src = tf.extractfile("package/dist/ranks/cl100k_base.js").read().decode()
    ranks = json.loads(src[src.index("{"):].rstrip().rstrip(";"))["bpe_ranks"]
    # Each line: "! OFFSET TOKEN TOKEN ...", base64 tokens of consecutive ranks.
    out = []
    for line in filter(None, ranks.split("\n")):
        _, offset, *tokens = line.split(" ")
        out += [(int(offset) + i, t) for i, t in enumerate(tokens)]
    data = "".join(f"{t} {r}\n" for r, t in sorted(out)).encode()
    got = hashlib.sha256(data).hexdigest()
    if got != SHA256:
        sys.exit(f"tiktoken_cache: the rebuilt cl100k_base.tiktoken has sha256 {got}, want {SHA256}")
    os.makedirs(cache_dir, exist_ok=True)
    path = os.path.join(cache_dir, hashlib.sha1(URL.encode()).hexdigest())
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main(*sys.argv[1:])
