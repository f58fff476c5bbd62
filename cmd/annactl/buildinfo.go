package main

import (
	"fmt"

	"github.com/anna-search/anna/encoder"
)

// runtimeLine says what this build runs models with: the encoder's
// default backend ("onnxruntime" where cgo is on and the annapure tag is
// not set, else "go") and the tokenizer implementation ("native" or
// "pure", by the same condition: tokenizerImpl). --version and stats print
// it.
func runtimeLine() string {
	return fmt.Sprintf("inference: %s, tokenizer: %s", encoder.DefaultBackend(), tokenizerImpl)
}
