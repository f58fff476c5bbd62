# The ablation's rows (issue #15) as `annactl train` stages, sourced by
# scripts/ablation.sh (on this CPU) and scripts/gpu-decoder.sh (on a lent
# GPU), so both train and evaluate a row the same way.
#
# row_stages ROW prints one line per training stage of ROW: the stage's name
# (its output is WORK/NAME-SEED), its share of the step budget (all; first
# or second: the two halves of a two-stage row) and its `annactl train`
# flags beyond the common ones, where {NAME} stands for an earlier stage's
# output directory. It fails for a row it does not know (zeroshot is no
# training: the GGUF imported as it is).
row_stages() {
	case $1 in
	contrastive) echo "contrastive all" ;;
	mean) echo "mean all --pooling mean" ;;
	multilayer) echo "multilayer all --pooling multilayer" ;;
	bidirectional) echo "bidirectional all --bidirectional" ;;
	causal2vec) echo "causal2vec all --technique causal2vec" ;;
	causal2vectuned) echo "causal2vectuned all --technique causal2vec --context-train lora=16" ;; # the context encoder trained too
	anchor) # stage I exports the decoder; stage II is a plain contrastive run from it
		echo "anchor1 first --technique anchor"
		echo "anchor second --model {anchor1}/hf" ;;
	autoregembed)
		echo "autoregembed1 first --technique autoregembed-compress"
		echo "autoregembed second --technique autoregembed-align --autoreg-stage1 {autoregembed1}" ;;
	*) return 1 ;;
	esac
}

# stage_steps SHARE STEPS: a stage's steps.
stage_steps() {
	case $1 in
	first) echo $(($2 / 2)) ;;
	second) echo $(($2 - $2 / 2)) ;;
	*) echo "$2" ;;
	esac
}

# stage_flags FLAGS WORK SEED: FLAGS with each {NAME} as WORK/NAME-SEED.
stage_flags() {
	sed "s|{\([a-z0-9]*\)}|$2/\1-$3|g" <<<"$1"
}

# train_stage NAME SEED FLAGS...: one `annactl train` stage ($A) into
# $RUNS/NAME-SEED, from $GGUF on $DATA with the rows' common flags — LoRA
# rank $RANK (0: full fine-tuning), $MAXLEN tokens, $BATCH queries × $GROUP
# documents, no held-out split, a checkpoint every $CKPT_EVERY steps, the
# export at $EVAL_MAXLEN tokens, --device $DEVICE, $TRAIN_FLAGS — and FLAGS.
# A finished stage (NAME-SEED/done) is skipped, a stopped one resumes from
# its checkpoint; its wall seconds go to NAME-SEED/seconds.
train_stage() {
	local out=$RUNS/$1-$2 seed=$2 t0=$SECONDS lora=()
	shift 2
	[ -f "$out/done" ] && return
	printf '\n== train %s (%s)\n' "$(basename "$out")" "$(date -u +%T)" >&2
	[ "$RANK" -gt 0 ] && lora=(--lora "$RANK")
	# shellcheck disable=SC2086
	"$A" train --model "$GGUF" --input "$DATA" --output "$out" "${lora[@]}" --max-length "$MAXLEN" \
		--batch-queries "$BATCH" --group "$GROUP" --seed "$seed" --eval-fraction -1 \
		--checkpoint-every "$CKPT_EVERY" --export-max-length "$EVAL_MAXLEN" --device "$DEVICE" $TRAIN_FLAGS \
		$([ -d "$out/checkpoint" ] && echo --resume) "$@" </dev/null
	echo $((SECONDS - t0)) >"$out/seconds"
	touch "$out/done"
}

# train_row ROW SEED: ROW's stages in order, $STEPS split between them as
# stage_steps says; it prints the last stage's name (the row's model is
# $RUNS/NAME-SEED/model).
train_row() {
	local stages name share flags last
	if ! stages=$(row_stages "$1"); then
		echo "unknown row $1" >&2
		return 2
	fi
	while read -r name share flags; do
		# shellcheck disable=SC2046
		train_stage "$name" "$2" --steps "$(stage_steps "$share" "$STEPS")" $(stage_flags "$flags" "$RUNS" "$2") >&2
		last=$name
	done <<<"$stages"
	echo "$last"
}

# eval_value EVAL MODEL prints MODEL's score on EVAL, by `annactl eval` ($A,
# the datasets under $SHARED): Spearman of cosine on STS-B and SICK test
# (stsb, sick), average precision of cosine for entailment against
# contradiction on SNLI test (snli), dense nDCG@10 with documents cut at
# the model's max length (scifact, cranfield, cisi, cacm).
eval_value() {
	case $1 in
	stsb) "$A" eval "$SHARED/stsbenchmark" --task sts --model "$2" --json ;;
	sick) "$A" eval "$SHARED/sick" --task sts --model "$2" --json ;;
	snli) "$A" eval "$SHARED/snli" --task pairclass --model "$2" --json ;;
	scifact | cranfield | cisi | cacm) "$A" eval "$SHARED/$1" --split test --model "$2" --precision float32 --modes dense --no-chunking --json ;;
	*)
		echo "unknown evaluation $1" >&2
		return 2
		;;
	esac | python3 -c 'import json,sys; d=json.load(sys.stdin); v=d.get("spearman", d.get("ap")); print(d["dense"]["ndcg@10"] if v is None else v)'
}
