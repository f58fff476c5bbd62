// Package bert is the trainer's BERT-family encoder, in float32 on the CPU
// in the manner of llm.c: the forward pass is internal/ops's ops in
// transformers' order (embeddings and LayerNorm, then per layer
// self-attention, residual and LayerNorm, the activation MLP, residual and
// LayerNorm), the backward each op's hand-written backward in reverse,
// every product through internal/tensor's GEMM. It pools (mean over the
// attention mask, [CLS], last token) or, as a cross-encoder, runs the
// sequence-classification head (pooler, tanh, classifier on [CLS]); LoRA
// adapts any of the layers' matrices with the encoder frozen. A batch
// through the model is an objective.Pass (Model.Pass), so the contrastive
// step (objective.ContrastiveGrad) and the cross-encoder step
// (Model.CrossGrad) are the ones a device trainer runs too.
//
// Weights are named as in a Hugging Face BertModel or
// BertForSequenceClassification checkpoint ("bert." prefix).
//
// Invariants: sequences are right-padded (each starts with a real token;
// the mask may leave holes, which attention and pooling skip); positions
// past a sequence's last real token are not computed and get no gradient.
// The backward is checked against PyTorch autograd
// (TestGradientsMatchPyTorch, tools/torch_ref.py) and the forward against
// ONNX Runtime running the installed models (package train's
// TestForwardMatchesONNXRuntime, with the trainer's export).
// A Model is not safe for concurrent use: it keeps its activation
// workspace. Bad input (a config that is not BERT, missing or misshapen
// tensors, ids outside the vocabularies, an empty sequence, an unknown
// pooling) is an error; sizes inside the ops are the package's own
// contract and a violation there panics.
package bert
