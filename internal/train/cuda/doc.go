// Package cuda is the trainer's GPU path, loaded at run time: the CUDA
// driver, cuBLAS and NVRTC are opened with dlopen when a GPU is asked for
// (Open), and the kernels cuBLAS does not cover ship as CUDA C++ source
// (kernels/*.cu, embedded) compiled by NVRTC for the device at hand.
// Nothing CUDA is needed to build anna or to run its CPU trainer; without a
// driver, a GPU or a library, Open returns an error saying which and where
// it looked.
//
// The ops mirror the Go CPU trainer's (internal/ops, one file per op named
// as the kernels here) op for op, same layouts and math; Encoder strings
// them into a device-resident BERT encoder (train/bert's twin), Decoder
// into a Llama-family decoder (train/decoder's). Device implements
// train.Accelerator.
// See README.md for what has been verified without a GPU and what remains.
//
// A nil context.Context given to a function of this package is
// context.Background().
package cuda
