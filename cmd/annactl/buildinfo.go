package main

import (
	"fmt"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/inference"
)

// runtimeLine says what this build runs models with: the encoder's
// default backend ("onnxruntime" where cgo is on and the annapure tag is
// not set, else "go") and the tokenizer implementation ("native" or
// "pure", by the same condition: tokenizerImpl). --version and stats print
// it, and where int8 models run elsewhere by default (the Go forward on
// a CPU with AMX or AVX-512 VNNI: inference.Int8Backend), that too.
func runtimeLine() string {
	be := encoder.DefaultBackend()
	if i8 := inference.Int8Backend(); i8 != be {
		be += ", int8: " + i8
	}
	return fmt.Sprintf("inference: %s, tokenizer: %s", be, tokenizerImpl)
}
