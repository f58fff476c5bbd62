// Package train is the trainer's loop, in the manner of llm.c: Run trains
// a BERT-family encoder (internal/train/bert) as a bi-encoder or a cross-encoder,
// or a Llama-family decoder (internal/train/decoder) as a bi-encoder — by the
// contrastive step (internal/train/objective) or by one of the papers' techniques
// (Config.Technique, a decoder.Method: internal/train/technique/...) — in fp32 on
// the CPU or, through an Accelerator (train/cuda's Device), on a GPU. The
// loop is the same for all of them: data (the miner's FlagEmbedding
// lines), sampled groups, micro-batches and accumulation, one gradient
// norm and clipping, the linear schedule, AdamW, checkpoints that resume
// exactly, the metrics file (internal/format/metrics) and the export. It names no
// architecture's op and no technique: a batch through a model is an
// objective.Pass, a technique a decoder.Technique.
//
// Run's phases are functions of one run value: prepare (settings, data,
// model, technique, device, the held-out split and schedule), resume,
// loop (one optimizer step at a time, evaluations, checkpoints) and
// finish (the export). Run returns the metrics; Config.Report receives
// them at each checkpoint, for a report drawn elsewhere (annactl train
// draws DIR/report.html with package report).
//
// Crash behaviour: Run writes its checkpoint (params, AdamW moments,
// state.json) to a temporary directory renamed over the previous one, at
// every CheckpointEvery steps, at the end and when its context is
// cancelled; a kill -9 loses at most the steps since the last one, and
// Resume continues bit for bit (on the CPU) from it. Only a missing
// state.json means "no checkpoint"; a checkpoint lacking a file it names is
// an error, never a fresh start over it. On a device the checkpoint holds
// the device's weights and moments, copied back first, so a run may stop
// on one side and resume on the other.
//
// The backward passes are checked against PyTorch autograd
// (train/bert's TestGradientsMatchPyTorch, train/decoder's and each
// technique's), and the forward pass against ONNX Runtime running the
// exported model (TestForwardMatchesONNXRuntime here).
//
// A nil context.Context given to a function of this package is
// context.Background().
package train
