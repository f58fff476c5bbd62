package onnx

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/model/safetensors/safetensorstest"
)

// A tensor named in two shards of a checkpoint is refused, whether both
// copies are converted or one of them is kept as stored.
func TestReadCheckpointRefusesDuplicates(t *testing.T) {
	w := map[string]*safetensors.Tensor{"w": {Name: "w", Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}}}
	for _, second := range []string{"F32", "BF16"} {
		dir := t.TempDir()
		if err := safetensors.WriteFile(filepath.Join(dir, "a.safetensors"), w, nil); err != nil {
			t.Fatal(err)
		}
		safetensorstest.WriteHalf(t, filepath.Join(dir, "b.safetensors"), w, func(string) string { return second })
		for _, keep := range []func(string) bool{nil, func(string) bool { return true }} {
			if _, _, err := ReadCheckpointKeeping(dir, keep); err == nil || !strings.Contains(err.Error(), `tensor "w" appears in more than one file`) {
				t.Errorf("second copy %s, keeping %v: err %v, want the duplicate named", second, keep != nil, err)
			}
		}
	}
}
