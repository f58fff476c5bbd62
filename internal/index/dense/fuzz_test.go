package dense

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/fuzzcheck"
)

// seedFile is the body of a small saved index (its trailer cut off):
// documents of one and of two passages, string, number and list
// metadata, a deleted document.
func seedFile(f *testing.F) []byte {
	ix := New(Config{Dim: 4})
	docs := []Doc{
		{ID: "a", Vectors: [][]float32{{1, 0, 0, 0}}, Meta: map[string]string{"lang": "en"}},
		{ID: "b", Vectors: [][]float32{{0, 1, 0, 0}, {0, 0.6, 0.8, 0}}, MetaValues: map[string]filter.Value{"year": filter.NumberValue(1999), "tags": filter.StringsValue("x", "y")}},
		{ID: "c", Vectors: [][]float32{{0, 0, 0, 1}}},
	}
	if err := ix.Add(context.Background(), docs); err != nil {
		f.Fatal(err)
	}
	if err := ix.Delete([]string{"c"}); err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(f.TempDir(), "dense.hnsw")
	if err := ix.Save(path, Meta{StoreID: "store", Fingerprint: "fp", AppliedSeq: 9}); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b[:len(b)-12]
}

// FuzzLoad: the reader of dense.hnsw on any content, given the checksum
// and trailer it wants (so that the fuzzer gets past them; a file without
// them is refused first): it fails with ErrCorrupt, or gives an index
// that Check, Search (with a filter) and IDs can walk, within a bounded
// time and at most 64 times the file's size in memory (plus 4 MB).
func FuzzLoad(f *testing.F) {
	f.Add(seedFile(f))
	f.Add([]byte("ANNADNS\x00"))
	f.Fuzz(func(t *testing.T, body []byte) {
		file := binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, castagnoli))
		file = append(file, trailerMagic[:]...)
		path := filepath.Join(t.TempDir(), "dense.hnsw")
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		var ix *Index
		var err error
		fuzzcheck.Within(t, 10*time.Second, "Load", func() {
			n := fuzzcheck.Allocated(func() { ix, _, err = Load(path) })
			if limit := 64*uint64(len(file)) + 4<<20; n > limit {
				t.Errorf("Load of %d bytes allocated %d", len(file), n)
			}
		})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		fuzzcheck.Within(t, 10*time.Second, "walking the index", func() {
			ix.Check()
			ix.IDs()
			q := make([]float32, ix.Config().Dim)
			if len(q) > 0 {
				q[0] = 1
			}
			for _, opts := range []SearchOptions{{}, {Filter: filter.Eq("lang", "en")}, {Filter: filter.Gte("year", "1990")}} {
				ix.Search(context.Background(), q, 3, opts)
			}
		})
	})
}
