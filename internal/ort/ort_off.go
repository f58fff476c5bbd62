//go:build !cgo || annapure

package ort

// Built reports whether this build links ONNX Runtime: not this one
// (CGO_ENABLED=0 or -tags annapure).
const Built = false
