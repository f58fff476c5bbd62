//go:build !cgo || annapure

package inference

import "github.com/anna-search/anna/internal/ort"

// newORTRunner fails: this build has no ONNX Runtime (Open refuses the
// backend before it gets here).
func newORTRunner(*Model) (runner, error) { return nil, ort.ErrNotBuilt }
