package hnsw

import (
	"bytes"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDotF32I8(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 384, 385} {
		p := make([]float32, n)
		c := make([]int8, n)
		var want float64
		for i := range p {
			p[i] = float32(rng.NormFloat64())
			c[i] = int8(rng.Intn(255) - 127)
			want += float64(p[i]) * float64(c[i])
		}
		for name, got := range map[string]float32{"dotF32I8": dotF32I8(p, c), "generic": dotF32I8Generic(p, c)} {
			if math.Abs(float64(got)-want) > 1e-3*(1+math.Abs(want)) {
				t.Errorf("%s n=%d: %v, want %v", name, n, got, want)
			}
		}
	}
}

// TestQuantizerError: the codes' dot product with a float query is within
// the quantization step of the exact one.
func TestQuantizerError(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	vecs := clustered(rng, 2000, 384, 20, 1.0)
	qz := fitQuantizer(len(vecs), 384, func(i int) []float32 { return vecs[i] })
	p := make([]float32, 384)
	codes := make([]int8, 384)
	worst := 0.0
	for i := 0; i < 200; i++ {
		q, x := vecs[i], vecs[len(vecs)-1-i]
		qz.encode(codes, x)
		c0 := qz.prepare(p, q)
		got := float64(c0 + dotF32I8(p, codes))
		worst = max(worst, math.Abs(got-float64(Dot(q, x))))
	}
	t.Logf("worst |approx - exact| dot product: %.5f", worst)
	if worst > 0.01 {
		t.Errorf("quantized dot products off by up to %.5f", worst)
	}
}

// TestQuantizedQueryError: a search's int8 query (quantizeQuery, dotI8)
// adds at most a rounding of p's own scale to the float query's distance
// (|Σ (p − ps·s)·c| ≤ ps/2 · Σ|c|), and s, a and ps describe p: |s| ≤
// 127, a = |s|, the largest |p| maps to ±127. A zero query quantizes to
// zeros.
func TestQuantizedQueryError(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	vecs := clustered(rng, 2000, 384, 20, 1.0)
	qz := fitQuantizer(len(vecs), 384, func(i int) []float32 { return vecs[i] })
	p := make([]float32, 384)
	s, a := make([]int8, 384), make([]uint8, 384)
	codes := make([]int8, 384)
	worst := 0.0
	for i := 0; i < 200; i++ {
		q, x := vecs[i], vecs[len(vecs)-1-i]
		qz.encode(codes, x)
		qq := query{p: p}
		qq.c0 = qz.prepare(p, q)
		qq.quantizeQuery(s, a)
		top := false
		for j := range s {
			if a[j] != uint8(max(s[j], -s[j])) || s[j] < -127 {
				t.Fatalf("query %d: s[%d] = %d, a[%d] = %d", i, j, s[j], j, a[j])
			}
			top = top || a[j] == 127
		}
		if !top {
			t.Fatalf("query %d: no value maps to ±127", i)
		}
		var bound float64
		for _, c := range codes {
			bound += math.Abs(float64(c))
		}
		bound *= float64(qq.ps) / 2
		f := float64(dotF32I8(p, codes))
		got := float64(qq.ps) * float64(dotI8(a, s, codes))
		if math.Abs(got-f) > bound*1.0001+1e-6 {
			t.Fatalf("query %d: int8 dot %g, float %g, beyond the rounding bound %g", i, got, f, bound)
		}
		worst = max(worst, math.Abs(got-f))
	}
	t.Logf("worst |int8 query - float query| dot product: %.5f", worst)
	zero := query{p: make([]float32, 384)}
	zero.quantizeQuery(s, a)
	if zero.ps != 0 || slices.ContainsFunc(zero.s, func(v int8) bool { return v != 0 }) {
		t.Fatalf("zero query: ps %g, s %v", zero.ps, zero.s)
	}
}

func buildGraph(vecs [][]float32, quant string, workers int) *Graph[int] {
	g := newTestGraph(5)
	g.M = 16
	g.EfConstruction = 100
	g.Quantize = quant
	g.Workers = workers
	g.KeyLevels = true
	nodes := make([]Node[int], len(vecs))
	for i, v := range vecs {
		nodes[i] = MakeNode(i, v)
	}
	for len(nodes) > 0 {
		k := min(len(nodes), 1000)
		g.Add(nodes[:k]...)
		nodes = nodes[k:]
	}
	g.Reconnect()
	return g
}

func recallAt(g *Graph[int], ref map[int][]float32, queries [][]float32, ef int) float64 {
	hits := 0
	for _, q := range queries {
		hits += overlap(keysOf(g.SearchEf(q, 10, ef)), exactKNN(ref, q, 10, DotDistance))
	}
	return float64(hits) / float64(10*len(queries))
}

// TestQuantizedRecall: int8 codes with exact re-scoring lose next to no
// recall against the float32 graph on clustered data, and return exact
// distances.
func TestQuantizedRecall(t *testing.T) {
	n, dim, nq := 20000, 128, 200
	if testing.Short() {
		n = 5000
	}
	vecs := clustered(rand.New(rand.NewSource(1)), n+nq, dim, 50, 0.6)
	ref := make(map[int][]float32, n)
	for i, v := range vecs[:n] {
		ref[i] = v
	}
	for _, quant := range []string{QuantizeNone, QuantizeInt8} {
		g := buildGraph(vecs[:n], quant, 0)
		mustCheck(t, g, quant)
		for _, ef := range []int{16, 32, 64} {
			r := recallAt(g, ref, vecs[n:], ef)
			t.Logf("%-5s ef=%d recall@10=%.4f", quant, ef, r)
			if ef == 64 && r < 0.95 {
				t.Errorf("%s: recall@10 at ef 64 = %.4f, want >= 0.95", quant, r)
			}
		}
		for _, r := range g.SearchEf(vecs[n], 10, 64) {
			if want := DotDistance(vecs[n], ref[r.Key]); r.Distance != want {
				t.Fatalf("%s: distance of %d = %v, want the exact %v", quant, r.Key, r.Distance, want)
			}
		}
	}
}

func exported(t *testing.T, g *Graph[int]) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := g.Export(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestParallelBuildIsDeterministic: the graph Add builds does not depend
// on how many goroutines it uses.
func TestParallelBuildIsDeterministic(t *testing.T) {
	vecs := clustered(rand.New(rand.NewSource(2)), 3000, 32, 30, 0.8)
	for _, quant := range []string{QuantizeNone, QuantizeInt8} {
		one := buildGraph(vecs, quant, 1)
		four := buildGraph(vecs, quant, 4)
		mustCheck(t, four, "4 workers")
		if !bytes.Equal(exported(t, one), exported(t, four)) {
			t.Errorf("%q: 1 and 4 workers built different graphs", quant)
		}
	}
}

// TestQuantizedMappedRoundTrip exports a quantized graph at an odd offset
// of a file, imports it with its float vectors mapped from the file, and
// checks that it searches alike, keeps working through adds, deletes and
// a compaction, and exports the same bytes again.
func TestQuantizedMappedRoundTrip(t *testing.T) {
	vecs := clustered(rand.New(rand.NewSource(4)), 4000, 48, 40, 0.8)
	g := buildGraph(vecs[:3000], QuantizeInt8, 0)
	path := filepath.Join(t.TempDir(), "g")
	const offset = 13
	var buf bytes.Buffer
	buf.Write(make([]byte, offset))
	if err := g.ExportWith(&buf, ExportOptions{Offset: offset}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		t.Fatal(err)
	}
	h := NewGraph[int]()
	if err := h.ImportWith(f, ImportOptions{File: f, Offset: offset, Size: int64(buf.Len())}); err != nil {
		t.Fatal(err)
	}
	if h.Quantize != QuantizeInt8 || h.nMapped != 3000 || len(h.vecs) != 0 {
		t.Fatalf("imported: Quantize %q, %d mapped vectors, %d floats in memory", h.Quantize, h.nMapped, len(h.vecs))
	}
	mustCheck(t, h, "imported")
	if !bytes.Equal(exported(t, g), exported(t, h)) {
		t.Fatal("the imported graph exports other bytes")
	}
	for _, q := range vecs[3000:3050] {
		if a, b := g.SearchEf(q, 10, 32), h.SearchEf(q, 10, 32); !slices.Equal(a, b) {
			t.Fatalf("searches differ: %v vs %v", a, b)
		}
	}
	// Exact (float) layer searches over the mapped vectors, as reconnect
	// runs them.
	q := h.exactQuery(vecs[3001])
	vs := h.getVisited()
	if res := h.searchLayer(&q, cand{h.entry, h.qdist(&q, h.entry)}, 10, 0, true, nil, vs); len(res) != 10 {
		t.Fatalf("exact layer search on mapped vectors: %d results", len(res))
	}
	// Adds go to memory, deletes pass the compaction threshold, which
	// moves vectors within the (private) mapping.
	nodes := make([]Node[int], 0, 1000)
	for i := 3000; i < 4000; i++ {
		nodes = append(nodes, MakeNode(i, vecs[i]))
	}
	h.Add(nodes...)
	for i := 0; i < 4000; i += 2 {
		h.Delete(i)
	}
	h.Reconnect()
	mustCheck(t, h, "after adds and deletes")
	for i := 1; i < 4000; i += 2 {
		v, ok := h.Lookup(i)
		if !ok || !slices.Equal(v, vecs[i]) {
			t.Fatalf("Lookup(%d) after compaction: %v %v", i, ok, v[:3])
		}
	}
	// The file is untouched.
	again, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(again, buf.Bytes()) {
		t.Fatalf("the mapped file changed (err %v)", err)
	}
}
