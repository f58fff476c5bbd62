#!/usr/bin/env bash
# Creates $ANNA_HOME/venv-clients with the client packages the server's
# compatibility tests use (tools/requirements-clients.txt: every version and
# wheel sha256 pinned). Idempotent: reinstalls only when the file changes.
# scripts/pydeps.sh runs it (make pydeps, make test).
set -euo pipefail
ANNA_HOME=${ANNA_HOME:-$HOME/.cache/anna}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=$ANNA_HOME/venv-clients
REQ=$ROOT/tools/requirements-clients.txt
stamp=$VENV/.requirements.sha256
# js-tiktoken (npm), whose ranks rebuild tiktoken's cl100k_base file for
# langchain-openai's defaults (tools/tiktoken_cache.py; that file's own host
# is not reachable from the test machines).
JST_URL=https://registry.npmjs.org/js-tiktoken/-/js-tiktoken-1.0.21.tgz
JST_SHA256=3b1f24b185565ca9a8d8f51466dfc4f99d67f1f05bc009258710ddb7a8d810fa
want=$(cat "$REQ" "$ROOT/tools/tiktoken_cache.py" <(echo "$JST_URL $JST_SHA256") | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
command -v python3 >/dev/null || { echo "pydeps-clients: python3 is needed for the client tests" >&2; exit 1; }
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
echo "pydeps-clients: installing the client packages into $VENV" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r "$REQ"
tgz=$ANNA_HOME/downloads/js-tiktoken-1.0.21.tgz
if [ ! -f "$tgz" ] || [ "$(sha256sum "$tgz" | cut -d' ' -f1)" != "$JST_SHA256" ]; then
	mkdir -p "$ANNA_HOME/downloads"
	curl -sSfL -o "$tgz.part" "$JST_URL"
	[ "$(sha256sum "$tgz.part" | cut -d' ' -f1)" = "$JST_SHA256" ] || { echo "pydeps-clients: $JST_URL: sha256 mismatch" >&2; rm -f "$tgz.part"; exit 1; }
	mv "$tgz.part" "$tgz"
fi
"$VENV/bin/python" "$ROOT/tools/tiktoken_cache.py" "$tgz" "$VENV/tiktoken-cache"
"$VENV/bin/python" -c 'import openai, langchain_openai, cohere, huggingface_hub, ollama, mcp' ||
	{ echo "pydeps-clients: the clients do not import" >&2; exit 1; }
echo "$want" >"$stamp"
