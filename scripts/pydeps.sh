#!/usr/bin/env bash
# Creates $ANNA_HOME/venv with the Python reference tools the comparison tests
# and benchmarks use (tools/requirements.txt, versions pinned). Idempotent:
# reinstalls only when the requirements file changes.
set -euo pipefail
ANNA_HOME=${ANNA_HOME:-$HOME/.cache/anna}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=$ANNA_HOME/venv
REQ=$ROOT/tools/requirements.txt
stamp=$VENV/.requirements.sha256
# The client packages of the server's compatibility tests: a venv of their own.
bash "$ROOT/scripts/pydeps-clients.sh"
# torch is installed without its nvidia-* dependencies (CPU only; see
# tools/requirements.txt and tools/torch_cpu_stubs.py).
TORCH=torch==2.15.0
# accelerate depends on torch, so it too goes in --no-deps.
ACCELERATE=accelerate==1.1.1
# transformers 4.51.3 (Qwen3) in a directory of its own: tools/requirements-qwen3.txt.
REQ_QWEN3=$ROOT/tools/requirements-qwen3.txt
want=$(cat "$REQ" "$REQ_QWEN3" "$ROOT/tools/torch_cpu_stubs.py" <(echo "$TORCH $ACCELERATE") | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
command -v python3 >/dev/null || { echo "pydeps: python3 is needed for the reference tools" >&2; exit 1; }
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
echo "pydeps: installing Python reference tools into $VENV" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQ"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$TORCH" "$ACCELERATE"
"$VENV/bin/python" "$ROOT/tools/torch_cpu_stubs.py" >&2
rm -rf "$VENV/transformers-4.51.3"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes \
	--target "$VENV/transformers-4.51.3" -r "$REQ_QWEN3"
"$VENV/bin/python" -c 'import torch, safetensors.torch' || { echo "pydeps: torch does not import" >&2; exit 1; }
echo "$want" >"$stamp"
