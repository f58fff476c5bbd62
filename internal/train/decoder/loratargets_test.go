package decoder

import (
	"testing"

	"github.com/anna-search/anna/internal/testmodels"
)

// TestDefaultLoRATargetsIsACopy: changing an element of DefaultLoRATargets
// (a caller narrowing the default in place) does not change the projections
// New loads.
func TestDefaultLoRATargetsIsACopy(t *testing.T) {
	cfg := testmodels.Decoder("llama")
	tensors := RandomTensors(cfg, 0.1, 1)
	old := DefaultLoRATargets[0]
	DefaultLoRATargets[0] = "not_a_proj"
	defer func() { DefaultLoRATargets[0] = old }()
	if _, err := New(cfg, tensors); err != nil {
		t.Fatalf("New after changing DefaultLoRATargets[0]: %v", err)
	}
}
