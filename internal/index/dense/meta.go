package dense

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/anna-search/anna/filter"
)

// Postings is what a filter is evaluated over: the documents (dense-local
// document numbers) holding a string metadata term, or a string value in a
// range of a key (a prefix is one), or a number value in a range (of
// filter.EncodeNumber keys), or all of them. Every call returns a new
// bitmap that the caller owns.
//
// It is a type alias of an unnamed interface so that filter.Filter, whose
// Postings is the same alias, satisfies Filter (named interfaces with the
// same methods are different types in Go, and so would be methods taking
// them). FilterFunc adapts any other evaluator.
type Postings = interface {
	Term(key, value string) *roaring.Bitmap
	Prefix(key, prefix string) *roaring.Bitmap
	Range(key, lo, hi string) *roaring.Bitmap
	NumberRange(key, lo, hi string) *roaring.Bitmap
	All() *roaring.Bitmap
}

// Filter selects documents by their metadata: Eval returns the numbers of
// the documents it matches (a nil bitmap matches none). Search intersects
// the result with the live documents, and may modify it.
type Filter interface {
	Eval(Postings) *roaring.Bitmap
}

// FilterFunc adapts a function to Filter.
type FilterFunc func(Postings) *roaring.Bitmap

// Eval calls f.
func (f FilterFunc) Eval(p Postings) *roaring.Bitmap { return f(p) }

// metaTerm is one posting of a document's metadata: a string value of key,
// or a number value (num) by its filter.EncodeNumber key.
type metaTerm struct {
	key, val string
	num      bool
}

func compareTerms(a, b metaTerm) int {
	if a.num != b.num {
		if a.num {
			return 1
		}
		return -1
	}
	return cmp.Or(strings.Compare(a.key, b.key), strings.Compare(a.val, b.val))
}

// metaTerms returns the postings of a document's metadata, sorted (the
// strings first) and each once; nil for none.
func metaTerms(meta map[string]string, values map[string]filter.Value) []metaTerm {
	var out []metaTerm
	filter.EachValue(meta, values, func(k string, v filter.Value) {
		if x, ok := v.Number(); ok {
			out = append(out, metaTerm{key: k, val: filter.EncodeNumber(x), num: true})
		} else {
			s, _ := v.Str()
			out = append(out, metaTerm{key: k, val: s})
		}
	})
	slices.SortFunc(out, compareTerms)
	return slices.Compact(out)
}

// hasTerm reports whether the sorted terms hold t.
func hasTerm(terms []metaTerm, t metaTerm) bool {
	_, ok := slices.BinarySearchFunc(terms, t, compareTerms)
	return ok
}

// metaIndex is the metadata index: a posting list (roaring bitmap of
// document numbers) per key=value, the values of each key in a sorted list
// for prefix and range queries — string values in keys, number values (by
// their filter.EncodeNumber keys, whose byte order is numeric order) in
// nums — and the set of live documents. Writers hold the Index's write
// lock; searches (readers) may run together, and only the lazily merged
// sorted lists need their own lock.
type metaIndex struct {
	keys map[string]*termList
	nums map[string]*termList
	live *roaring.Bitmap
}

// termList is the posting lists of one metadata key.
type termList struct {
	post map[string]*roaring.Bitmap // value -> documents; never empty

	mu sync.Mutex
	// sorted holds the values in increasing order as of the last merge;
	// it is replaced, never modified, so a reader may keep using it.
	sorted []string
	// pending are values given a posting list since (unsorted, maybe
	// repeated or already in sorted); removed says some value of sorted
	// may have lost its list.
	pending []string
	removed bool
}

func newMetaIndex() metaIndex {
	return metaIndex{keys: map[string]*termList{}, nums: map[string]*termList{}, live: roaring.New()}
}

// space returns the map of t's kind of value.
func (mi *metaIndex) space(t metaTerm) map[string]*termList {
	if t.num {
		return mi.nums
	}
	return mi.keys
}

// add indexes document doc with terms.
func (mi *metaIndex) add(doc uint32, terms []metaTerm) {
	mi.live.Add(doc)
	for _, t := range terms {
		m := mi.space(t)
		tl := m[t.key]
		if tl == nil {
			tl = &termList{post: map[string]*roaring.Bitmap{}}
			m[t.key] = tl
		}
		bm := tl.post[t.val]
		if bm == nil {
			bm = roaring.New()
			tl.post[t.val] = bm
			tl.pending = append(tl.pending, t.val)
		}
		bm.Add(doc)
	}
}

// remove drops document doc, indexed with terms.
func (mi *metaIndex) remove(doc uint32, terms []metaTerm) {
	mi.live.Remove(doc)
	for _, t := range terms {
		m := mi.space(t)
		tl := m[t.key]
		if tl == nil {
			continue
		}
		if bm := tl.post[t.val]; bm != nil {
			bm.Remove(doc)
			if bm.IsEmpty() {
				delete(tl.post, t.val)
				tl.removed = true
			}
		}
		if len(tl.post) == 0 {
			delete(m, t.key)
		}
	}
}

// values returns the values of the key in increasing order, merging the
// values added and dropping the ones removed since the last call: O(V)
// when something changed, so a run of writes costs one merge at the next
// prefix or range query (or Save or Check) instead of one per write.
func (tl *termList) values() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if len(tl.pending) == 0 && !tl.removed {
		return tl.sorted
	}
	slices.Sort(tl.pending)
	merged := make([]string, 0, len(tl.post))
	old, add := tl.sorted, tl.pending
	for len(old) > 0 || len(add) > 0 {
		var v string
		if len(add) == 0 || (len(old) > 0 && old[0] <= add[0]) {
			v, old = old[0], old[1:]
		} else {
			v, add = add[0], add[1:]
		}
		if _, ok := tl.post[v]; ok && (len(merged) == 0 || merged[len(merged)-1] != v) {
			merged = append(merged, v)
		}
	}
	tl.sorted, tl.pending, tl.removed = merged, nil, false
	return merged
}

// span unions the posting lists of the values v of tl with lo <= v and
// (hi == "" or v < hi), or those starting with prefix when prefix is set:
// a binary search to the first, then the values that follow.
func (tl *termList) span(lo, hi string, prefix bool) *roaring.Bitmap {
	if tl == nil {
		return roaring.New()
	}
	vals := tl.values()
	i, _ := slices.BinarySearch(vals, lo)
	var bms []*roaring.Bitmap
	for ; i < len(vals); i++ {
		if prefix && !strings.HasPrefix(vals[i], lo) || !prefix && hi != "" && vals[i] >= hi {
			break
		}
		bms = append(bms, tl.post[vals[i]])
	}
	switch len(bms) {
	case 0:
		return roaring.New()
	case 1:
		return bms[0].Clone()
	}
	return filter.Union(bms...)
}

// Term returns the documents whose metadata has key = value.
func (mi *metaIndex) Term(key, value string) *roaring.Bitmap {
	if tl := mi.keys[key]; tl != nil {
		if bm := tl.post[value]; bm != nil {
			return bm.Clone()
		}
	}
	return roaring.New()
}

// Prefix returns the documents with a string value for key that starts
// with prefix, from the key's sorted value list.
func (mi *metaIndex) Prefix(key, prefix string) *roaring.Bitmap {
	return mi.keys[key].span(prefix, "", true)
}

// Range returns the documents with a string value v for key in [lo, hi)
// (hi "": no upper bound).
func (mi *metaIndex) Range(key, lo, hi string) *roaring.Bitmap {
	return mi.keys[key].span(lo, hi, false)
}

// NumberRange returns the documents with a number value for key whose
// filter.EncodeNumber key is in [lo, hi) (hi "": no upper bound).
func (mi *metaIndex) NumberRange(key, lo, hi string) *roaring.Bitmap {
	return mi.nums[key].span(lo, hi, false)
}

// hasKey reports whether some document has a value for key.
func (mi *metaIndex) hasKey(key string) bool { return mi.keys[key] != nil || mi.nums[key] != nil }

// All returns every live document.
func (mi *metaIndex) All() *roaring.Bitmap { return mi.live.Clone() }

// sortedKeys returns the keys of m in increasing order.
func sortedKeys(m map[string]*termList) []string {
	return slices.Sorted(maps.Keys(m))
}

// KeyStats describes one metadata key of the indexed documents.
type KeyStats struct {
	Key      string
	Values   int          // distinct values (strings and numbers)
	Numeric  bool         // some value is a number
	Min, Max float64      // of the number values, when Numeric
	Top      []ValueCount // the string values held by the most documents, most first
}

// ValueCount is a metadata value and how many documents hold it.
type ValueCount struct {
	Value string
	Docs  int
}

// maxTopScan bounds the distinct values of a key whose counts MetaKeys
// ranks: a key with more (a path, an ID) gets no Top.
const maxTopScan = 10000

// keyStats lists every key with its values' counts, top values each.
func (mi *metaIndex) keyStats(top int) []KeyStats {
	byKey := map[string]*KeyStats{}
	get := func(k string) *KeyStats {
		if ks := byKey[k]; ks != nil {
			return ks
		}
		ks := &KeyStats{Key: k}
		byKey[k] = ks
		return ks
	}
	for k, tl := range mi.keys {
		ks := get(k)
		ks.Values += len(tl.post)
		if top <= 0 || len(tl.post) > maxTopScan {
			continue
		}
		for v, bm := range tl.post {
			ks.Top = append(ks.Top, ValueCount{Value: v, Docs: int(bm.GetCardinality())})
		}
		slices.SortFunc(ks.Top, func(a, b ValueCount) int {
			if a.Docs != b.Docs {
				return b.Docs - a.Docs
			}
			return strings.Compare(a.Value, b.Value)
		})
		ks.Top = ks.Top[:min(top, len(ks.Top))]
	}
	for k, tl := range mi.nums {
		ks := get(k)
		ks.Values += len(tl.post)
		ks.Numeric = true
		first := true
		for enc := range tl.post {
			x, ok := filter.DecodeNumber(enc)
			if !ok {
				continue
			}
			if first || x < ks.Min {
				ks.Min = x
			}
			if first || x > ks.Max {
				ks.Max = x
			}
			first = false
		}
	}
	out := make([]KeyStats, 0, len(byKey))
	for _, ks := range byKey {
		out = append(out, *ks)
	}
	slices.SortFunc(out, func(a, b KeyStats) int { return strings.Compare(a.Key, b.Key) })
	return out
}
