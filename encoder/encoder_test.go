package encoder

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestReferenceCosines reproduces the cosine similarities published for
// sentence-transformers/all-MiniLM-L6-v2 with the converted model.
func TestReferenceCosines(t *testing.T) {
	enc := testEncoder(t)
	path := filepath.Join(sharedDir(t), "reference", "all-MiniLM-L6-v2-cosines.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("reference file absent: %v", err)
	}
	var ref struct {
		Tolerance float64 `json:"tolerance"`
		Pairs     []struct {
			A, B   string
			Cosine float64
		} `json:"pairs"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(ref.Pairs) == 0 || ref.Tolerance <= 0 {
		t.Fatalf("%s: no pairs or no tolerance", path)
	}
	for _, p := range ref.Pairs {
		v, err := enc.EmbedDocuments(context.Background(), []string{p.A, p.B})
		if err != nil {
			t.Fatal(err)
		}
		if n := dot(v[0], v[0]); math.Abs(n-1) > 1e-5 {
			t.Errorf("embedding of %q has squared norm %v, want 1", p.A, n)
		}
		got := dot(v[0], v[1])
		t.Logf("%-28q %-30q cosine %.5f (published %.4f, diff %.1e)", p.A, p.B, got, p.Cosine, got-p.Cosine)
		if math.Abs(got-p.Cosine) > ref.Tolerance {
			t.Errorf("cosine(%q, %q) = %.5f, published %.4f (tolerance %g)", p.A, p.B, got, p.Cosine, ref.Tolerance)
		}
	}
}
