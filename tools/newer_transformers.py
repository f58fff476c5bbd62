"""transformers 4.51.3 (the first release with Qwen3) for the Qwen3
references: scripts/pydeps.sh installs it, with the tokenizers it needs, into
a directory of its own inside the venv (tools/requirements-qwen3.txt), beside
the venv's transformers 4.46.3. use() puts that directory first on sys.path;
call it before anything imports transformers or tokenizers, in a process that
needs Qwen3 only (two transformers cannot share a process)."""
import os
import sys

DIR = os.path.join(sys.prefix, "transformers-4.51.3")


def use():
    if "transformers" in sys.modules or "tokenizers" in sys.modules:
        sys.exit("newer_transformers.use(): transformers is already imported")
    if not os.path.isdir(DIR):
        sys.exit(f"{DIR} is missing: run make pydeps (tools/requirements-qwen3.txt)")
    sys.path.insert(0, DIR)
    import transformers

    if transformers.__version__ != "4.51.3":
        sys.exit(f"{DIR}: transformers {transformers.__version__}, want 4.51.3")
