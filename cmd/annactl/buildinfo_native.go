//go:build cgo && !annapure

package main

// tokenizerImpl is the tokenizer package's default implementation in this
// build (its native.go has the same constraint; TestRuntimeLine checks).
const tokenizerImpl = "native"
