package encoder

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
)

// TestGoBackendQuantizedDecoders: every installed int8 or int4 decoder
// embedder (a real SmolLM2) embeds documents and instructed queries
// through the Go backend as through ONNX Runtime: int4 within 1e-4 per
// component (the same dequantized weights, float32 products), int8 with
// cosine ≥ 0.985 per vector. The integer sums are exact, but an
// activation near a quantization step's boundary may round one step away
// from ONNX Runtime's (after float32 ops rounded a little differently),
// and over SmolLM2's 30 layers these add up: on 2026-11-27 its int8
// vectors of four texts had cosine 0.993–0.997 between the backends, and
// 0.986–0.991 (Go) and 0.984–0.991 (ONNX Runtime) with the float32
// model's.
func TestGoBackendQuantizedDecoders(t *testing.T) {
	needORT(t)
	dirs := installedDecoders(true)
	if len(dirs) == 0 {
		t.Skipf("no quantized decoder embedder installed in %s (annactl models install smollm2-135m-instruct --quantize int8)", home.ModelsDir())
	}
	ctx := context.Background()
	for _, dir := range dirs {
		md, err := model.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		vecs := embedOnBothBackends(t, ctx, dir)
		worst, cos := 0.0, 1.0
		for i := range vecs[0] {
			var ab, aa, bb float64
			for j, a := range vecs[0][i] {
				b := vecs[1][i][j]
				worst = max(worst, math.Abs(float64(a-b)))
				ab, aa, bb = ab+float64(a)*float64(b), aa+float64(a)*float64(a), bb+float64(b)*float64(b)
			}
			cos = min(cos, ab/math.Sqrt(aa*bb))
		}
		t.Logf("%s: %d vectors, largest component difference %.2e, smallest cosine %.6f", filepath.Base(dir), len(vecs[0]), worst, cos)
		if md.Manifest.Quantization == model.QuantizeInt4 && worst > 1e-4 || cos < 0.985 {
			t.Errorf("%s: the Go backend's vectors differ from ONNX Runtime's by up to %.2e, cosine %.6f", dir, worst, cos)
		}
	}
}

// BenchmarkQuantizedDecoderBackends is BenchmarkDecoderBackends for the
// installed int8 and int4 decoder embedders: the first 40 SciFact
// abstracts through ONNX Runtime and through the Go backend, the sides in
// turn, each side's docs/s.
func BenchmarkQuantizedDecoderBackends(b *testing.B) {
	benchDecoderBackends(b, true)
}
