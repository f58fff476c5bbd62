package rerank

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/anna-search/anna/internal/inference"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/testmodels"
	trainbert "github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/model"
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

// TestGoBackendPrefixedCheckpoint: a cross-encoder converted from a
// BertForSequenceClassification checkpoint (its encoder's tensors under
// "bert.", as every such checkpoint names them; a tiny random one here)
// loads in the pure-Go backend from its default (fused) graph and from the
// unfused one, scoring the same from both and as ONNX Runtime does where
// this build has it. (The Go backend failed on the fused graph, listing
// the layers' query, key and value weights as missing.)
func TestGoBackendPrefixedCheckpoint(t *testing.T) {
	cfg := testmodels.MiniLMVocab(testmodels.BERT())
	cfg.NumLabelsField = 1
	ts := trainbert.RandomTensors(cfg, true, 0.2, 9)
	if _, ok := ts["bert.encoder.layer.0.attention.self.query.weight"]; !ok {
		t.Fatal("the test checkpoint's encoder is not under bert.")
	}
	tok := testmodels.MiniLMTokenizer(t)
	ctx := context.Background()
	backends := []string{inference.BackendGo}
	if inference.DefaultBackend() == inference.BackendORT {
		backends = append(backends, inference.BackendORT)
	}
	var goFused []float32
	for _, unfused := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "ce")
		if _, err := onnx.WriteDir(ctx, dir, cfg, nil, ts, tok, onnx.Settings{Task: model.TaskRerank, MaxLength: 64, Unfused: unfused}); err != nil {
			t.Fatal(err)
		}
		var scores [][]float32
		for _, be := range backends {
			r, err := Load(ctx, dir, Options{Backend: be, BatchSize: 3, IntraOpThreads: 1})
			if err != nil {
				t.Fatalf("unfused %v, backend %s: %v", unfused, be, err)
			}
			s, err := r.Score(ctx, "what do cats eat", []string{"Cats eat fish.", "The stock market fell today.", "Dogs like bones, and cats like fish and milk."})
			r.Close()
			if err != nil {
				t.Fatalf("unfused %v, backend %s: %v", unfused, be, err)
			}
			scores = append(scores, s)
		}
		// Both graphs give the Go backend the checkpoint's weights exactly.
		if !unfused {
			goFused = scores[0]
		} else if !slices.Equal(scores[0], goFused) {
			t.Errorf("Go backend: the unfused graph scores %v, the fused one %v", scores[0], goFused)
		}
		if len(scores) < 2 {
			t.Logf("unfused %v: Go scores %v (no ONNX Runtime in this build to compare with)", unfused, scores[0])
			continue
		}
		var worst float64
		for i := range scores[0] {
			worst = max(worst, math.Abs(float64(scores[0][i]-scores[1][i]))/(1+math.Abs(float64(scores[1][i]))))
		}
		t.Logf("unfused %v: Go %v, ONNX Runtime %v, largest relative difference %.2e", unfused, scores[0], scores[1], worst)
		if worst > 1e-4 {
			t.Errorf("unfused %v: Go backend scores differ from ONNX Runtime's by up to %.2e", unfused, worst)
		}
	}
}
