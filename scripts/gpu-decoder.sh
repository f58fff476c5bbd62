#!/usr/bin/env bash
# The decoder loop on a lent GPU (issue #14, "run the same loop longer
# there"): SmolLM2-135M-Instruct under LoRA trained by `annactl train
# --device cuda` on the ablation's data, then exported and evaluated here.
# A device call carries 64 MiB and SmolLM2's GGUF alone is 98 MB, so the
# inputs travel in three calls to a machine kept warm (it is given back 30 s
# after a call), and the checkpoint comes back in pieces of 15 MiB.
#
#   scripts/gpu-decoder.sh prepare WORK
#       here: the GGUF and data (scripts/decoder-data.sh), a stripped
#       annactl, and gpu-1/, gpu-2/, gpu-3/ in the repository root
#       (git-ignored), each under 64 MiB; prints the three device calls.
#   three device calls, back to back, each with carry ["gpu-N"]:
#       1: mkdir -p /tmp/anna && cp gpu-1/* /tmp/anna/
#       2: cp gpu-2/* /tmp/anna/
#       3: bash gpu-3/run.sh
#   scripts/gpu-decoder.sh collect WORK FILES_AT
#       here: the checkpoint put together from the files that came back,
#       the run resumed at its last step (nothing left to train, so it
#       exports) and the export evaluated (EVALS).
#
# Environment (prepare; collect must see the same): STEPS (1000), BATCH (8
# queries), GROUP (8: 1 positive + 7 negatives), MAXLEN (128), RANK (8: the
# checkpoint with its AdamW moments comes back within $OUT's 64 MiB: 31 MB
# at rank 8), POOLING (lasttoken; mean, multilayer or latent for the
# ablation's other single-stage rows), TRAIN_FLAGS (more `annactl train`
# flags, e.g. --bidirectional), SEED (1), EVALS for collect ("stsb
# scifact"; scifact is dense nDCG@10 at 128 tokens, ~18 min on 2 cores).
# DEVICE (cuda) and OUT_DIR ($OUT) let run.sh be tried on a CPU.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=$ROOT/bin/annactl
SHARED=${SHARED:-$ROOT/../shared/datasets}
STEPS=${STEPS:-1000}
BATCH=${BATCH:-8}
GROUP=${GROUP:-8}
MAXLEN=${MAXLEN:-128}
RANK=${RANK:-8}
POOLING=${POOLING:-lasttoken}
TRAIN_FLAGS=${TRAIN_FLAGS:-}
SEED=${SEED:-1}
EVALS=${EVALS-stsb scifact}
cmd=${1:?usage: scripts/gpu-decoder.sh prepare|collect WORK [FILES_AT]}
W=${2:?usage: scripts/gpu-decoder.sh prepare|collect WORK [FILES_AT]}
GGUF=$W/SmolLM2-135M-Instruct.Q4_1.gguf
# The arguments every run of this loop trains with (the GPU's and the
# resumed one here).
train_args() {
	echo --input "$1" --output "$2" --lora "$RANK" --steps "$STEPS" --batch-queries "$BATCH" --group "$GROUP" \
		--max-length "$MAXLEN" --pooling "$POOLING" --seed "$SEED" --eval-fraction -1 --checkpoint-every 100 $TRAIN_FLAGS
}

case $cmd in
prepare)
	bash "$ROOT/scripts/decoder-data.sh" "$W"
	cd "$ROOT"
	rm -rf gpu-1 gpu-2 gpu-3
	mkdir -p gpu-1 gpu-2 gpu-3
	half=$(( ($(stat -c %s "$GGUF") + 1) / 2 ))
	head -c "$half" "$GGUF" > gpu-1/gguf.1
	tail -c +$((half + 1)) "$GGUF" > gpu-2/gguf.2
	cp "$W/data.jsonl" gpu-3/data.jsonl # beside the binary: each call, with the repository's 5 MB, under 64 MiB
	eval "$(make -s env)"
	go build -ldflags "-s -w" -o gpu-3/annactl ./cmd/annactl
	sum=$(sha256sum "$GGUF" | cut -d' ' -f1)
	cat > gpu-3/run.sh <<EOF
#!/usr/bin/env bash
# Written by scripts/gpu-decoder.sh prepare: the GGUF put together, trained
# on the GPU, the checkpoint (and metrics) split into \$OUT.
set -euo pipefail
REPO=\$(pwd)
OUT_DIR=\${OUT_DIR:-\$OUT}
cd /tmp/anna
[ -f smollm2.gguf ] || cat gguf.1 gguf.2 > smollm2.gguf
cp "\$REPO/gpu-3/data.jsonl" data.jsonl
echo "$sum  smollm2.gguf" | sha256sum -c --quiet
export ANNA_HOME=/tmp/anna/home
export ANNA_CUDA_LIBS=\${ANNA_CUDA_LIBS:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib}
DEVICE=\${DEVICE:-cuda}
flags=""
[ "\$DEVICE" = cuda ] && flags="--tf32"
\$REPO/gpu-3/annactl train --model smollm2.gguf $(train_args data.jsonl out) --device "\$DEVICE" \$flags --no-export \$( [ -d out/checkpoint ] && echo --resume )
for f in out/checkpoint/* out/metrics.jsonl; do split -b 15m -d "\$f" "\$OUT_DIR/\$(basename "\$f")."; done
ls -la "\$OUT_DIR"
EOF
	du -sh gpu-1 gpu-2 gpu-3
	cat <<EOF

Three device calls, back to back (each within 30 s of the last), carry as named:
  1  carry ["gpu-1"]:  mkdir -p /tmp/anna && cp gpu-1/* /tmp/anna/
  2  carry ["gpu-2"]:  cp gpu-2/* /tmp/anna/
  3  carry ["gpu-3"]:  bash gpu-3/run.sh
then: scripts/gpu-decoder.sh collect $W FILES_AT
EOF
	;;
collect)
	from=${3:?usage: scripts/gpu-decoder.sh collect WORK FILES_AT}
	out=$W/gpu-run
	mkdir -p "$out/checkpoint"
	for f in params.safetensors optimizer.safetensors state.json; do
		cat "$from/$f".* > "$out/checkpoint/$f"
	done
	cat "$from"/metrics.jsonl.* > "$out/metrics.jsonl"
	# Resumed at its last step: nothing to train, so it exports (the GGUF's
	# base with the GPU's LoRA factors merged), served at 128 tokens.
	# shellcheck disable=SC2046
	"$A" train --model "$GGUF" $(train_args "$W/data.jsonl" "$out") --export-max-length 128 --resume
	for e in $EVALS; do
		case $e in
		stsb) "$A" eval "$SHARED/stsbenchmark" --task sts --model "$out/model" --json ;;
		sick) "$A" eval "$SHARED/sick" --task sts --model "$out/model" --json ;;
		snli) "$A" eval "$SHARED/snli" --task pairclass --model "$out/model" --json ;;
		*) "$A" eval "$SHARED/$e" --split test --model "$out/model" --modes dense --no-chunking --json ;;
		esac | tee "$out/eval-$e.json"
	done
	;;
*)
	echo "usage: scripts/gpu-decoder.sh prepare|collect WORK [FILES_AT]" >&2
	exit 2
	;;
esac
