package encoder

import (
	"context"
	"math"
	"testing"

	"github.com/anna-search/anna/internal/tensor"
)

// cosine is a·b/(|a||b|) in float64 (1 for two zero vectors).
func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 && bb == 0 {
		return 1
	}
	return ab / math.Sqrt(aa*bb)
}

// TestGoBackendInt8MatchesORT: MiniLM's int8 graph (as this converter
// writes it: graphForms) through the pure-Go backend reproduces ONNX
// Runtime's int8 arithmetic on the reference sentences and the golden
// texts, one text a batch and five: most vectors within 1e-6 of ONNX
// Runtime's (float32 rounding of the attention and pooling; the integer
// products are exact), the rest moved by a value rounded to the other side
// of a quantization step (ONNX Runtime's flash attention sums in another
// order), cosine ≥ 0.995; and the Go vectors as close to the float32
// model's as ONNX Runtime's int8 ones (mean cosine within 0.001). (Every
// input is quantized per row and no batch is padded, so the batch size
// changes nothing on either side: TestVectorIsItsOwn.)
func TestGoBackendInt8MatchesORT(t *testing.T) {
	needORT(t)
	dir := graphForms(t)[formInt8]
	ctx := context.Background()
	texts := append(referenceTexts(t), goldenTexts...)
	embed := func(dir, be string, batch int) [][]float32 {
		enc, err := Load(ctx, dir, Options{Backend: be, BatchSize: batch, Workers: 2})
		if err != nil {
			t.Fatalf("%s, backend %s: %v", dir, be, err)
		}
		defer enc.Close()
		if got := enc.m.Backend(); got != be {
			t.Fatalf("loaded with backend %s, runs %s", be, got)
		}
		v, err := enc.EmbedDocuments(ctx, texts)
		if err != nil {
			t.Fatalf("backend %s: %v", be, err)
		}
		return v
	}
	f32 := embed(testModel(t), BackendORT, 5)
	for _, batch := range []int{1, 5} {
		ort8, go8 := embed(dir, BackendORT, batch), embed(dir, BackendGo, batch)
		var sum, lowest, worst, sumGo, sumORT = 0.0, 1.0, 0.0, 0.0, 0.0
		same := 0
		floor := 0.995
		for i := range ort8 {
			c, d := cosine(ort8[i], go8[i]), maxAbsDiff(ort8[i], go8[i])
			sum += c
			lowest = min(lowest, c)
			worst = max(worst, d)
			if d <= 1e-6 {
				same++
			}
			sumGo += cosine(go8[i], f32[i])
			sumORT += cosine(ort8[i], f32[i])
			if c < floor {
				t.Errorf("batches of %d, text %d (%.40q): Go int8 vs ONNX Runtime int8 cosine %.6f < %g", batch, i, texts[i], c, floor)
			}
		}
		n := float64(len(ort8))
		t.Logf("batches of %d, %d texts: Go int8 vs ORT int8 cosine mean %.6f, min %.6f, max abs diff %.2e, %d within 1e-6; vs float32: Go int8 %.5f, ORT int8 %.5f",
			batch, len(ort8), sum/n, lowest, worst, same, sumGo/n, sumORT/n)
		if 2*same < len(ort8) {
			t.Errorf("batches of %d: only %d of %d vectors within 1e-6 of ONNX Runtime's", batch, same, len(ort8))
		}
		if sumGo/n < sumORT/n-0.001 {
			t.Errorf("batches of %d: Go int8 vectors are farther from float32's (mean cosine %.5f) than ONNX Runtime's int8 (%.5f)", batch, sumGo/n, sumORT/n)
		}
	}
}

// TestGoBackendInt8: in every build (the pure-Go ones included) the Go
// backend loads MiniLM's int8 graph (graphForms) and its vectors are close
// to the float32 model's: mean cosine ≥ 0.993 (0.9941, as ONNX Runtime's
// int8, on these texts since every input is quantized per row; 0.995 with
// the Q/K/V input per batch), none under 0.98 — 0.95 for the golden texts
// (empty, blank, one word: a few pooled tokens, where quantization noise
// is a larger share; 0.979 for the empty text).
func TestGoBackendInt8(t *testing.T) {
	dir := graphForms(t)[formInt8]
	ctx := context.Background()
	texts := append(referenceTexts(t), goldenTexts...)
	var vecs [2][][]float32
	for i, d := range []string{dir, testModel(t)} {
		be := BackendGo
		if i == 1 {
			be = DefaultBackend()
		}
		enc, err := Load(ctx, d, Options{Backend: be, BatchSize: 4})
		if err != nil {
			t.Fatalf("%s, backend %s: %v", d, be, err)
		}
		vecs[i], err = enc.EmbedDocuments(ctx, texts)
		enc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	var sum float64
	for i := range texts {
		c := cosine(vecs[0][i], vecs[1][i])
		sum += c
		floor := 0.98
		if i >= len(texts)-len(goldenTexts) {
			floor = 0.95
		}
		if c < floor {
			t.Errorf("text %d (%.40q): Go int8 vs float32 cosine %.4f < %g", i, texts[i], c, floor)
		}
	}
	if mean := sum / float64(len(texts)); mean < 0.993 {
		t.Errorf("Go int8 vs float32: mean cosine %.5f < 0.993", mean)
	} else {
		t.Logf("Go int8 vs float32, %d texts: mean cosine %.5f", len(texts), mean)
	}
}

// TestDefaultBackendInt8: without a backend named, an int8 model runs on
// the pure-Go forward where the CPU has AMX-INT8 or AVX-512 VNNI (and
// this build has ONNX Runtime to choose from), a float32 one on
// DefaultBackend.
func TestDefaultBackendInt8(t *testing.T) {
	needORT(t)
	forms := graphForms(t)
	_, k := tensor.Kernels()
	want := BackendORT
	if k == "amx" || k == "avx512vnni" {
		want = BackendGo
	}
	for dir, want := range map[string]string{forms[formInt8]: want, testModel(t): DefaultBackend()} {
		enc, err := Load(context.Background(), dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := enc.m.Backend(); got != want {
			t.Errorf("%s (int8 kernel %s): backend %s, want %s", dir, k, got, want)
		}
		if _, err := enc.EmbedDocuments(context.Background(), []string{"a text"}); err != nil {
			t.Error(err)
		}
		enc.Close()
	}
}
