// Package ort owns anna's use of the ONNX Runtime shared library.
//
// onnxruntime_go keeps one OrtEnv per process, so the library is loaded and
// the environment created once (sync.Once) and never destroyed: sessions from
// any package share it, and tearing it down while another package still
// holds a session would crash. Everything else (sessions, tensors) belongs to
// the caller.
//
// The package links ONNX Runtime through onnxruntime_go, which needs cgo:
// ort.go is built with `cgo && !annapure`. Elsewhere (CGO_ENABLED=0, or
// -tags annapure) only Built (false) and ErrNotBuilt exist, and anna's
// BERT models run in pure Go instead (internal/inference's backend "go").
package ort

import "errors"

// ErrNotBuilt is returned (wrapped) where ONNX Runtime is asked for in a
// build without it.
var ErrNotBuilt = errors.New("this program was built without ONNX Runtime (CGO_ENABLED=0 or -tags annapure)")
