// Package filtertest has what tests of filter evaluation share: random
// metadata and random filter trees over a small alphabet chosen to hit the
// edge cases (a key that is a prefix of another, empty values, values
// holding NUL and 0xff bytes, multi-byte UTF-8), and a brute-force
// filter.Postings over a slice of metadata to compare an index's with.
package filtertest

import (
	"math/rand/v2"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/anna-search/anna/filter"
)

// Keys are the metadata keys Meta and Random draw from: "k" is a prefix of
// "k2", and "é" is two bytes.
var Keys = []string{"k", "k2", "lang", "é"}

// Values are the metadata values Meta and Random draw from.
var Values = []string{"", "a", "ab", "abc", "b", "a\x00b", "a\xff", "\xff", "ü", "üx"}

// Meta returns random metadata: each key of Keys present with probability
// 1/2 (so a third of filters on a key meet documents lacking it), with a
// random value of Values, plus now and then a key holding the separator,
// which indexes do not index and no valid filter names.
func Meta(rng *rand.Rand) map[string]string {
	m := map[string]string{}
	for _, k := range Keys {
		if rng.IntN(2) == 0 {
			m[k] = Values[rng.IntN(len(Values))]
		}
	}
	if rng.IntN(8) == 0 {
		m["k\x00a"] = Values[rng.IntN(len(Values))]
	}
	return m
}

// Random returns a random valid filter tree of at most depth levels of
// And, Or and Not over Eq, In and Prefix leaves (and the zero Filter) on
// Keys and Values.
func Random(rng *rand.Rand, depth int) filter.Filter {
	key := func() string { return Keys[rng.IntN(len(Keys))] }
	val := func() string { return Values[rng.IntN(len(Values))] }
	n := 6
	if depth > 0 {
		n = 9
	}
	switch rng.IntN(n) {
	case 0, 1:
		return filter.Eq(key(), val())
	case 2:
		vs := make([]string, 1+rng.IntN(3))
		for i := range vs {
			vs[i] = val()
		}
		return filter.In(key(), vs...)
	case 3, 4:
		v := val()
		return filter.Prefix(key(), v[:rng.IntN(len(v)+1)])
	case 5:
		if rng.IntN(4) == 0 {
			return filter.Filter{}
		}
		return filter.Eq(key(), val())
	case 6:
		return filter.Not(Random(rng, depth-1))
	default:
		fs := make([]filter.Filter, 1+rng.IntN(3))
		for i := range fs {
			fs[i] = Random(rng, depth-1)
		}
		if rng.IntN(2) == 0 {
			return filter.And(fs...)
		}
		return filter.Or(fs...)
	}
}

// Postings is a brute-force filter.Postings: document i has metadata
// Docs[i] and is live when Live holds i. Term and Prefix scan every
// document, deleted ones included (Eval must mask them out), and remember
// each bitmap they returned with a copy, so Unchanged can tell whether Eval
// modified one.
type Postings struct {
	Docs []map[string]string
	Live *roaring.Bitmap

	given, copies []*roaring.Bitmap
}

func (p *Postings) scan(match func(meta map[string]string) bool) *roaring.Bitmap {
	bm := roaring.New()
	for i, m := range p.Docs {
		if match(m) {
			bm.Add(uint32(i))
		}
	}
	return p.give(bm)
}

func (p *Postings) give(bm *roaring.Bitmap) *roaring.Bitmap {
	p.given = append(p.given, bm)
	p.copies = append(p.copies, bm.Clone())
	return bm
}

// Term returns the documents with key=value, nil for none (which Eval
// must read as empty).
func (p *Postings) Term(key, value string) *roaring.Bitmap {
	bm := p.scan(func(m map[string]string) bool { v, ok := m[key]; return ok && v == value })
	if bm.IsEmpty() {
		return nil
	}
	return bm
}

// Prefix returns the documents whose value of key starts with prefix.
func (p *Postings) Prefix(key, prefix string) *roaring.Bitmap {
	return p.scan(func(m map[string]string) bool {
		v, ok := m[key]
		return ok && len(v) >= len(prefix) && v[:len(prefix)] == prefix
	})
}

// All returns Live.
func (p *Postings) All() *roaring.Bitmap { return p.give(p.Live) }

// Unchanged reports whether every bitmap handed out still equals its copy.
func (p *Postings) Unchanged() bool {
	for i, bm := range p.given {
		if !bm.Equals(p.copies[i]) {
			return false
		}
	}
	return true
}
