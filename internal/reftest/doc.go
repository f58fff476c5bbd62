// Package reftest is the harness of the tests that check anna's numerics
// against a reference: the gradient checks of the trainers (internal/train/bert,
// internal/train/decoder, internal/train/technique/...) against PyTorch autograd, the forward
// and tokenizer checks against transformers and gguf-py, and the device
// trainer's tests (internal/train/cuda) against the CPU's.
//
// # Golden files
//
// A reference that a Python tool computes (tools/*.py, run in the venv
// `make pydeps` installs) is committed as a golden file, so that every
// check runs on a fresh checkout without Python, as llm.c's tests read
// PyTorch's numbers from a file. A Suite names the tool and the golden
// file (testdata/NAME.golden in the test's package: a gzip'd tar of
// manifest.json and, under each case's name, the files the tool wrote).
// The test writes each case's inputs into a folder as the tool reads them
// (a tiny random model, a batch, a job); the suite then fills the folder
// with the tool's outputs, from the golden file.
//
// The manifest records the SHA-256 of the tool (and of the tools/ files it
// imports or runs) and of every input file of every case. When either
// differs from what the test has now — the tool was edited, or the Go side
// makes other inputs (another random model, batch or config) — the golden
// file is stale and the test fails, saying which case and file changed and
// how to regenerate: `make goldens`, which runs the reference tests with
// ANNA_GOLDENS=update, so that each suite runs its tool over the inputs and
// rewrites its golden file (it needs the venv and fails without it). JSON
// inputs are hashed in a canonical form (keys sorted), so that a reordered
// struct does not make a golden file stale.
//
// Nothing here runs at run time; a golden file holds float32 values as the
// tool wrote them, so the comparisons are exactly the ones they were when
// the tool ran beside the test, with the same tolerances.
//
// # Shared pieces
//
// RelErr and Close bound the relative L2 error of a tensor; Grads and Loss
// compare a training step with a reference's grads.safetensors (GradLimit);
// Padded draws the right-padded token batches the tests feed; Fill and
// Jitter give LoRA factors and heads values away from their
// initialisation; WriteParams and WriteJSON write a case's inputs.
package reftest
