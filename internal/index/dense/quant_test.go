package dense

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/anna-search/anna/internal/index/dense/densetest"
)

// TestQuantizedReopen: an int8 index keeps its quantization through Save
// and Load whatever Config the caller would give, answers alike after
// reloading, keeps working through upserts and deletes on the mapped
// vectors, and its file's checksum covers the mapped vectors.
func TestQuantizedReopen(t *testing.T) {
	const n, dim = 3000, 64
	data := densetest.Clustered(7, n+50, dim, 30, 1.0)
	docs := make([]Doc, n)
	for i := range docs {
		vecs := [][]float32{data[i]}
		if i%10 == 0 {
			vecs = append(vecs, data[(i+1)%n]) // a second passage
		}
		docs[i] = Doc{ID: fmt.Sprintf("d%05d", i), Vectors: vecs, Meta: map[string]string{"m": fmt.Sprint(i % 7)}}
	}
	ctx := context.Background()
	ix := New(Config{Dim: dim}) // int8, the default
	if err := ix.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dense.hnsw")
	if err := ix.Save(path, Meta{Fingerprint: "f", AppliedSeq: 1}); err != nil {
		t.Fatal(err)
	}
	loaded, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if q := loaded.Config().Quantize; q != QuantizeInt8 {
		t.Fatalf("reloaded Quantize %q", q)
	}
	if is := loaded.Check(); len(is) > 0 {
		t.Fatalf("reloaded: %+v", is)
	}
	for _, q := range data[n:] {
		a, _ := ix.Search(ctx, q, 10, SearchOptions{})
		b, _ := loaded.Search(ctx, q, 10, SearchOptions{})
		if !slices.Equal(a, b) {
			t.Fatalf("reloaded index answers differently:\n%v\n%v", a, b)
		}
	}
	// Writes after loading: upserts, deletes past the compaction threshold.
	var ids []string
	for i := 0; i < n; i += 2 {
		ids = append(ids, docs[i].ID)
	}
	if err := loaded.Delete(ids); err != nil {
		t.Fatal(err)
	}
	if err := loaded.Add(ctx, []Doc{{ID: "new", Vectors: [][]float32{data[n]}}, {ID: docs[1].ID, Vectors: [][]float32{data[n+1]}}}); err != nil {
		t.Fatal(err)
	}
	if is := loaded.Check(); len(is) > 0 {
		t.Fatalf("after writes: %+v", is)
	}
	if v, ok := loaded.Vectors(docs[3].ID); !ok || !slices.Equal(v[0], data[3]) {
		t.Fatalf("vectors of %s after compaction: %v", docs[3].ID, ok)
	}
	hits, _ := loaded.Search(ctx, data[n+1], 1, SearchOptions{})
	if len(hits) != 1 || hits[0].ID != docs[1].ID || hits[0].Score < 0.9999 {
		t.Fatalf("upserted document not found first with its new vector: %+v", hits)
	}
	path2 := filepath.Join(t.TempDir(), "dense2.hnsw")
	if err := loaded.Save(path2, Meta{Fingerprint: "f", AppliedSeq: 2}); err != nil {
		t.Fatal(err)
	}
	again, _, err := Load(path2)
	if err != nil || again.Len() != loaded.Len() || again.Config().Quantize != QuantizeInt8 {
		t.Fatalf("second reload: %v", err)
	}

	// A flipped byte among the mapped vectors (near the end of the file,
	// before the 12-byte trailer) fails the checksum.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-12-100] ^= 0x40
	bad := filepath.Join(t.TempDir(), "bad.hnsw")
	if err := os.WriteFile(bad, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged vectors: %v, want ErrCorrupt", err)
	}

	if err := New(Config{Quantize: "int4"}).Add(ctx, docs[:1]); err == nil {
		t.Fatal("unknown Quantize accepted")
	}

	// A float32 index stays float32 through Save and Load.
	fl := New(Config{Dim: dim, Quantize: QuantizeFloat32})
	if err := fl.Add(ctx, docs[:100]); err != nil {
		t.Fatal(err)
	}
	if err := fl.Save(path, Meta{}); err != nil {
		t.Fatal(err)
	}
	if fl2, _, err := Load(path); err != nil || fl2.Config().Quantize != QuantizeFloat32 {
		t.Fatalf("float32 index reloaded: %v", err)
	}
}
