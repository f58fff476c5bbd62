package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/anna-search/anna/filter"
)

// TestMetaValuesRoundTrip: numbers and lists come back as they were
// stored, and a record of a doc with string metadata only is version 2,
// exactly the bytes the version-2-only encoder wrote (issue #41: stores
// written before MetaValues stay readable, by this code and the old).
func TestMetaValuesRoundTrip(t *testing.T) {
	s, _ := openTemp(t)
	docs := []Doc{
		{ID: "a", Text: "typed", Meta: map[string]string{"lang": "en"}, MetaValues: map[string]filter.Value{
			"year": filter.NumberValue(1960),
			"tags": filter.ListValue(filter.StringValue("a"), filter.NumberValue(-2.5), filter.StringValue("")),
			"none": filter.ListValue(),
		}},
		{ID: "b", Text: "strings", Meta: map[string]string{"k": "v"}},
	}
	if _, err := s.Put(docs, "fp", one([][]float32{{1, 0}, {0, 1}}), nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetMany([]string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range docs {
		g := got[i]
		if g.ID != want.ID || !reflect.DeepEqual(g.Meta, want.Meta) || len(g.MetaValues) != len(want.MetaValues) {
			t.Fatalf("get %q = %#v, want %#v", want.ID, g, want)
		}
		for k, v := range want.MetaValues {
			if !g.MetaValues[k].Equal(v) {
				t.Fatalf("get %q: %s = %s, want %s", want.ID, k, g.MetaValues[k], v)
			}
		}
	}

	// The version 2 layout, written out by hand as the old encoder did.
	old := []byte{docVersion}
	old = binary.AppendUvarint(old, 7)
	old = appendString(old, "T")
	old = appendString(old, "text")
	old = binary.AppendUvarint(old, 1)
	old = appendString(old, "tags")
	old = appendString(old, `["a","b"]`)
	old = sealed(tagDoc, "", []byte("x"), old)
	if enc := encodeDoc(Doc{ID: "x", Title: "T", Text: "text", Meta: map[string]string{"tags": `["a","b"]`}}, 7); !bytes.Equal(enc, old) {
		t.Fatalf("a string-only doc encodes as %x, want the version 2 bytes %x", enc, old)
	}
	d, seq, err := decodeDoc("x", old)
	if err != nil || seq != 7 || d.Meta["tags"] != `["a","b"]` || d.MetaValues != nil {
		t.Fatalf("decode version 2 = %#v, %d, %v: an old string value stays a string", d, seq, err)
	}

	// A damaged value is ErrCorrupt, never data.
	rec := encodeDoc(docs[0], 1)
	body := rec[:len(rec)-crcSize]
	for _, cut := range []int{1, 5, 9} {
		bad := sealed(tagDoc, "", []byte("a"), body[:len(body)-cut])
		if _, _, err := decodeDoc("a", bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("record cut by %d: err = %v, want ErrCorrupt", cut, err)
		}
	}
}
