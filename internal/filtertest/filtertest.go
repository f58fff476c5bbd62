// Package filtertest has what tests of filter evaluation share: random
// metadata and random filter trees over a small alphabet chosen to hit the
// edge cases (a key that is a prefix of another, empty values, values
// holding NUL and 0xff bytes, multi-byte UTF-8, numbers written as text,
// negative zero, lists with repeats), and a brute-force filter.Postings
// over a slice of documents' metadata to compare an index's with.
package filtertest

import (
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/anna-search/anna/filter"
)

// Keys are the metadata keys Meta and Random draw from: "k" is a prefix of
// "k2", and "é" is two bytes.
var Keys = []string{"k", "k2", "lang", "é"}

// Values are the metadata values Meta and Random draw from: strings, some
// of which read as numbers ("10" sorts before "9" as a string).
var Values = []string{"", "a", "ab", "abc", "b", "a\x00b", "a\xff", "\xff", "ü", "üx", "1", "10", "9", "-2.5", "1e1"}

// ValueKeys are the keys MetaValues draws from: never a key of Meta's, so a
// document's metadata stays canonical (a key in one map only).
var ValueKeys = []string{"n", "tags"}

// Numbers are the numbers MetaValues and Random draw from (as text in
// filters): 10 equals "1e1" and "10", -0 equals 0.
var Numbers = []float64{0, math.Copysign(0, -1), 1, 9, 10, -2.5, 0.5, 1e300, -1e300}

// MetaValues returns random multi-valued and numeric metadata on ValueKeys:
// each key present with probability 1/2, holding a number, a list of
// numbers and strings (repeats and the empty list included) or a string.
func MetaValues(rng *rand.Rand) map[string]filter.Value {
	m := map[string]filter.Value{}
	for _, k := range ValueKeys {
		if rng.IntN(2) == 0 {
			continue
		}
		switch rng.IntN(5) {
		case 0:
			m[k] = filter.StringValue(Values[rng.IntN(len(Values))])
		case 1, 2:
			m[k] = filter.NumberValue(Numbers[rng.IntN(len(Numbers))])
		default:
			vs := make([]filter.Value, rng.IntN(4))
			for i := range vs {
				if rng.IntN(2) == 0 {
					vs[i] = filter.NumberValue(Numbers[rng.IntN(len(Numbers))])
				} else {
					vs[i] = filter.StringValue(Values[rng.IntN(len(Values))])
				}
			}
			m[k] = filter.ListValue(vs...)
		}
	}
	return m
}

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
// And, Or and Not over Eq, In, Prefix and range leaves (and the zero
// Filter) on Keys and ValueKeys, with Values and Numbers as text.
func Random(rng *rand.Rand, depth int) filter.Filter {
	key := func() string {
		if rng.IntN(3) == 0 {
			return ValueKeys[rng.IntN(len(ValueKeys))]
		}
		return Keys[rng.IntN(len(Keys))]
	}
	val := func() string {
		if rng.IntN(4) == 0 {
			return strconv.FormatFloat(Numbers[rng.IntN(len(Numbers))], 'g', -1, 64)
		}
		return Values[rng.IntN(len(Values))]
	}
	n := 7
	if depth > 0 {
		n = 10
	}
	switch rng.IntN(n) {
	case 6:
		switch rng.IntN(5) {
		case 0:
			return filter.Gt(key(), val())
		case 1:
			return filter.Gte(key(), val())
		case 2:
			return filter.Lt(key(), val())
		case 3:
			return filter.Lte(key(), val())
		}
		return filter.Range(key(), val(), val())
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
	case 7:
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

// Doc is one document's metadata.
type Doc struct {
	Meta   map[string]string
	Values map[string]filter.Value
}

// Postings is a brute-force filter.Postings: document i has metadata
// Docs[i] and is live when Live holds i. Term, Prefix, Range and
// NumberRange scan every document, deleted ones included (Eval must mask
// them out), and remember each bitmap they returned with a copy, so
// Unchanged can tell whether Eval modified one.
type Postings struct {
	Docs []Doc
	Live *roaring.Bitmap

	given, copies []*roaring.Bitmap
}

// scan returns the documents with a value of key that match accepts.
func (p *Postings) scan(key string, match func(v filter.Value) bool) *roaring.Bitmap {
	bm := roaring.New()
	for i, d := range p.Docs {
		filter.EachValue(d.Meta, d.Values, func(k string, v filter.Value) {
			if k == key && match(v) {
				bm.Add(uint32(i))
			}
		})
	}
	return p.give(bm)
}

func (p *Postings) give(bm *roaring.Bitmap) *roaring.Bitmap {
	p.given = append(p.given, bm)
	p.copies = append(p.copies, bm.Clone())
	return bm
}

func str(v filter.Value, match func(s string) bool) bool {
	s, ok := v.Str()
	return ok && match(s)
}

// Term returns the documents with the string key=value, nil for none
// (which Eval must read as empty).
func (p *Postings) Term(key, value string) *roaring.Bitmap {
	bm := p.scan(key, func(v filter.Value) bool { return str(v, func(s string) bool { return s == value }) })
	if bm.IsEmpty() {
		return nil
	}
	return bm
}

// Prefix returns the documents with a string value of key that starts with
// prefix.
func (p *Postings) Prefix(key, prefix string) *roaring.Bitmap {
	return p.scan(key, func(v filter.Value) bool {
		return str(v, func(s string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix })
	})
}

// Range returns the documents with a string value of key in [lo, hi).
func (p *Postings) Range(key, lo, hi string) *roaring.Bitmap {
	return p.scan(key, func(v filter.Value) bool {
		return str(v, func(s string) bool { return lo <= s && (hi == "" || s < hi) })
	})
}

// NumberRange returns the documents with a number value of key whose key
// (filter.EncodeNumber) is in [lo, hi).
func (p *Postings) NumberRange(key, lo, hi string) *roaring.Bitmap {
	return p.scan(key, func(v filter.Value) bool {
		x, ok := v.Number()
		e := filter.EncodeNumber(x)
		return ok && lo <= e && (hi == "" || e < hi)
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
