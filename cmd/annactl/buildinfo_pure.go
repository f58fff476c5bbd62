//go:build !cgo || annapure

package main

// tokenizerImpl is the tokenizer package's default implementation in this
// build (its native_off.go has the same constraint; TestRuntimeLine checks).
const tokenizerImpl = "pure"
