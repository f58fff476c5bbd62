package hnsw

import (
	"bytes"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/anna-search/anna/internal/fuzzcheck"
)

// seedGraph exports a small graph in the current format, quantized or
// not.
func seedGraph(q string) []byte {
	g := NewGraph[uint64]()
	g.Quantize, g.Distance = q, DotDistance
	rng := rand.New(rand.NewSource(1))
	for i := range 40 {
		v := make(Vector, 8)
		var n float32
		for j := range v {
			v[j] = rng.Float32() - 0.5
			n += v[j] * v[j]
		}
		for j := range v {
			v[j] /= float32(math.Sqrt(float64(n)))
		}
		g.Add(MakeNode(uint64(i), v))
	}
	g.Delete(3)
	var b bytes.Buffer
	if err := g.Export(&b); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// FuzzImport: the graph reader (what dense.hnsw holds after its document
// table) on any bytes, its length known as Load knows the file's: it
// fails, leaving the graph empty, or gives a graph that Check, Search and
// Keys can walk, within a bounded time and at most 64 times the input's
// size in memory (plus 4 MB); a graph that imports exports to bytes that
// import to the same keys.
func FuzzImport(f *testing.F) {
	f.Add(seedGraph(QuantizeNone))
	f.Add(seedGraph(QuantizeInt8))
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := NewGraph[uint64]()
		var err error
		fuzzcheck.Within(t, 10*time.Second, "Import", func() {
			n := fuzzcheck.Allocated(func() { err = g.ImportWith(bytes.NewReader(data), ImportOptions{Size: int64(len(data))}) })
			if limit := 64*uint64(len(data)) + 4<<20; n > limit {
				t.Errorf("Import of %d bytes allocated %d", len(data), n)
			}
		})
		if err != nil {
			if g.Len() != 0 {
				t.Fatalf("a failed Import left %d nodes", g.Len())
			}
			return
		}
		fuzzcheck.Within(t, 10*time.Second, "walking the graph", func() {
			g.Check()
			if d := g.Dims(); d > 0 && g.Len() > 0 {
				q := make(Vector, d)
				q[0] = 1
				g.SearchEf(q, 5, 16)
			}
		})
		var b bytes.Buffer
		if err := g.Export(&b); err != nil {
			t.Fatalf("an imported graph does not export: %v", err)
		}
		h := NewGraph[uint64]()
		if err := h.Import(&b); err != nil {
			t.Fatalf("an imported graph, exported, does not import: %v", err)
		}
		if h.Len() != g.Len() {
			t.Fatalf("%d nodes, %d after a round trip", g.Len(), h.Len())
		}
	})
}
