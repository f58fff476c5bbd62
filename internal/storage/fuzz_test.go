package storage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/anna-search/anna/filter"
)

// FuzzRecords: every record decoder of anna.db on any body, sealed with a
// valid checksum so that the fuzzer reaches past it (and on the raw bytes,
// whose checksum then almost always fails): decoding never panics, fails
// only with ErrCorrupt, and what it decodes encodes back to a record that
// decodes to the same value.
func FuzzRecords(f *testing.F) {
	d := Doc{ID: "doc", Title: "t", Text: "some text", Meta: map[string]string{"k": "v"},
		MetaValues: map[string]filter.Value{"n": filter.NumberValue(3), "l": filter.StringsValue("a", "b")}}
	raw := encodeDoc(d, 7)
	f.Add(byte(0), "doc", raw[:len(raw)-crcSize])
	raw = encodeVector("fp", "doc", 9, Embedding{Vectors: [][]float32{{1, 2}, {3, 4}}, Spans: []Span{{0, 3}, {2, 9}}})
	f.Add(byte(1), "doc", raw[:len(raw)-crcSize])
	raw = encodeChange(seqKey(5), OpPut, 4, "doc")
	f.Add(byte(2), string(seqKey(5)), raw[:len(raw)-crcSize])
	raw = encodeState("model", 3, []byte("fp"))
	f.Add(byte(3), "model", raw[:len(raw)-crcSize])
	f.Add(byte(4), "", []byte{2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, which byte, key string, body []byte) {
		corrupt := func(what string, err error) {
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: %v is not ErrCorrupt", what, err)
			}
		}
		for _, sealedBody := range []bool{true, false} {
			rec := func(tag byte, scope string) []byte {
				if sealedBody {
					return sealed(tag, scope, []byte(key), body)
				}
				return body
			}
			switch which % 4 {
			case 0:
				d, seq, err := decodeDoc(key, rec(tagDoc, ""))
				corrupt("doc", err)
				if err == nil {
					d2, seq2, err := decodeDoc(key, encodeDoc(d, seq))
					if err != nil || seq2 != seq || !sameDoc(d, d2) {
						t.Fatalf("doc %+v (seq %d) re-encoded decodes as %+v (seq %d), %v", d, seq, d2, seq2, err)
					}
				}
			case 1:
				e, seq, err := decodeVector("fp", key, rec(tagVector, "fp"))
				corrupt("vector", err)
				if err == nil {
					e2, seq2, err := decodeVector("fp", key, encodeVector("fp", key, seq, e))
					if err != nil || seq2 != seq || !reflect.DeepEqual(e.Spans, e2.Spans) || fmt.Sprint(e.Vectors) != fmt.Sprint(e2.Vectors) {
						t.Fatalf("vector %+v re-encoded decodes as %+v, %v", e, e2, err)
					}
				}
			case 2:
				c, err := decodeChange([]byte(key), rec(tagChange, ""))
				corrupt("change", err)
				if err == nil {
					c2, err := decodeChange([]byte(key), encodeChange([]byte(key), c.Op, c.TextSeq, c.ID))
					if err != nil || c2 != c {
						t.Fatalf("change %+v re-encoded decodes as %+v, %v", c, c2, err)
					}
				}
			case 3:
				v, version, err := decodeState(key, rec(tagState, ""))
				corrupt("state", err)
				if err == nil {
					v2, version2, err := decodeState(key, encodeState(key, version, v))
					if err != nil || version2 != version || string(v2) != string(v) || (v == nil) != (v2 == nil) {
						t.Fatalf("state %q (%d) re-encoded decodes as %q (%d), %v", v, version, v2, version2, err)
					}
				}
			}
		}
	})
}

// sameDoc compares two decoded documents (Values by Equal).
func sameDoc(a, b Doc) bool {
	return a.ID == b.ID && a.Title == b.Title && a.Text == b.Text && maps.Equal(a.Meta, b.Meta) &&
		maps.EqualFunc(a.MetaValues, b.MetaValues, filter.Value.Equal)
}

// fuzzStore is the bytes of a small store with every kind of record (a
// put, an upsert, a delete, vectors of two models, state), the seed
// FuzzSalvage mutates.
func fuzzStore(f *testing.F) []byte {
	path := filepath.Join(f.TempDir(), "seed.db")
	s, err := Open(path, Options{Create: true})
	if err != nil {
		f.Fatal(err)
	}
	docs := []Doc{{ID: "a", Title: "A", Text: "alpha", Meta: map[string]string{"k": "v"}}, {ID: "b", Text: "beta",
		MetaValues: map[string]filter.Value{"n": filter.NumberValue(2)}}, {ID: "c", Text: "gamma"}}
	vecs := one([][]float32{{1, 0}, {0, 1}, {1, 1}})
	if _, err := s.Put(docs, "m1", vecs, map[string][]byte{"model": []byte("m1")}); err != nil {
		f.Fatal(err)
	}
	docs[0].Text = "alpha again"
	if _, err := s.Put(docs[:1], "m1", vecs[:1], nil); err != nil {
		f.Fatal(err)
	}
	if _, err := s.Delete([]string{"c"}); err != nil {
		f.Fatal(err)
	}
	if _, err := s.PutVectors("m2", []string{"a", "b"}, one([][]float32{{1}, {2}})); err != nil {
		f.Fatal(err)
	}
	s.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzSalvage: Salvage, the reader of damaged stores, on any file (a real
// store damaged by the fuzzer, or anything else): it never panics, finishes
// within a bound, and what it writes is a store that opens and checks
// clean.
func FuzzSalvage(f *testing.F) {
	seed := fuzzStore(f)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte("not a store at all"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		src, dst := filepath.Join(dir, "anna.db"), filepath.Join(dir, "salvaged.db")
		if err := os.WriteFile(src, data, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := Salvage(ctx, src, dst); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("Salvage of %d bytes took more than 30 s", len(data))
			}
			return
		}
		s, err := Open(dst, Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("the salvaged store does not open: %v", err)
		}
		defer s.Close()
		ps, err := s.Check(ctx, CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			t.Errorf("the salvaged store: %s", p)
		}
	})
}
