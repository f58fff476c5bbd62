package rerank

import (
	"context"
	"math"
	"testing"

	"github.com/anna-search/anna/internal/inference"
)

// TestGoBackendMatchesORT: a BERT cross-encoder (MiniLM with a one-label
// and a two-label head) scores the same pairs through the pure-Go backend
// as through ONNX Runtime, within 1e-4 (relative to the score's size).
func TestGoBackendMatchesORT(t *testing.T) {
	if inference.DefaultBackend() != inference.BackendORT {
		t.Skip("this build has no ONNX Runtime to compare with")
	}
	ctx := context.Background()
	w1, b1 := sinHead(t)
	H := len(w1)
	w2 := make([]float32, 2*H)
	for i := range w2 {
		w2[i] = float32(math.Cos(float64(i) * 0.7))
	}
	for _, head := range []struct {
		name string
		w, b []float32
	}{{"one label", w1, b1}, {"two labels", w2, []float32{0.1, -0.2}}} {
		var scores [2][]float32
		for i, be := range []string{inference.BackendORT, inference.BackendGo} {
			r := export(t, head.w, head.b, Options{Backend: be, BatchSize: 3, IntraOpThreads: 2})
			if got := r.m.Backend(); got != be {
				t.Fatalf("%s: loaded with backend %s, runs %s", head.name, be, got)
			}
			s, err := r.Score(ctx, scoreQuery, scoreDocs())
			if err != nil {
				t.Fatalf("%s, backend %s: %v", head.name, be, err)
			}
			scores[i] = s
		}
		var worst float64
		for i := range scores[0] {
			worst = max(worst, math.Abs(float64(scores[0][i]-scores[1][i]))/(1+math.Abs(float64(scores[0][i]))))
		}
		t.Logf("%s: ONNX Runtime %v, Go %v, largest relative difference %.2e", head.name, scores[0], scores[1], worst)
		if worst > 1e-4 {
			t.Errorf("%s: Go backend scores differ from ONNX Runtime's by up to %.2e", head.name, worst)
		}
	}
}

// needORT skips a test of what only ONNX Runtime runs (decoder rerankers)
// in a build without it.
func needORT(t *testing.T) {
	t.Helper()
	if inference.DefaultBackend() != inference.BackendORT {
		t.Skip("needs ONNX Runtime, which this build lacks (CGO_ENABLED=0 or -tags annapure)")
	}
}
