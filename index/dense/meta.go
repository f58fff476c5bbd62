package dense

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
)

// Postings is what a filter is evaluated over: the documents (dense-local
// document numbers) holding a metadata term, or a value prefix of a key,
// or all of them. Every call returns a new bitmap that the caller owns.
//
// It is a type alias of an unnamed interface so that a filter package can
// declare the same alias and its Filter type then satisfies this one
// without either package importing the other (named interfaces with the
// same methods are different types in Go, and so would be methods taking
// them). FilterFunc adapts any other evaluator.
type Postings = interface {
	Term(key, value string) *roaring.Bitmap
	Prefix(key, prefix string) *roaring.Bitmap
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

// metaIndex is the metadata index: a posting list (roaring bitmap of
// document numbers) per key=value, the values of each key in a sorted list
// for prefix queries, and the set of live documents. Writers hold the
// Index's write lock; searches (readers) may run together, and only the
// lazily merged sorted lists need their own lock.
type metaIndex struct {
	keys map[string]*termList
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
	return metaIndex{keys: map[string]*termList{}, live: roaring.New()}
}

// add indexes document doc with meta.
func (mi *metaIndex) add(doc uint32, meta map[string]string) {
	mi.live.Add(doc)
	for k, v := range meta {
		tl := mi.keys[k]
		if tl == nil {
			tl = &termList{post: map[string]*roaring.Bitmap{}}
			mi.keys[k] = tl
		}
		bm := tl.post[v]
		if bm == nil {
			bm = roaring.New()
			tl.post[v] = bm
			tl.pending = append(tl.pending, v)
		}
		bm.Add(doc)
	}
}

// remove drops document doc, indexed with meta.
func (mi *metaIndex) remove(doc uint32, meta map[string]string) {
	mi.live.Remove(doc)
	for k, v := range meta {
		tl := mi.keys[k]
		if tl == nil {
			continue
		}
		if bm := tl.post[v]; bm != nil {
			bm.Remove(doc)
			if bm.IsEmpty() {
				delete(tl.post, v)
				tl.removed = true
			}
		}
		if len(tl.post) == 0 {
			delete(mi.keys, k)
		}
	}
}

// values returns the values of the key in increasing order, merging the
// values added and dropping the ones removed since the last call: O(V)
// when something changed, so a run of writes costs one merge at the next
// prefix query (or Save or Check) instead of one per write.
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

// Term returns the documents whose metadata has key = value.
func (mi *metaIndex) Term(key, value string) *roaring.Bitmap {
	if tl := mi.keys[key]; tl != nil {
		if bm := tl.post[value]; bm != nil {
			return bm.Clone()
		}
	}
	return roaring.New()
}

// Prefix returns the documents whose metadata value for key starts with
// prefix, from the key's sorted value list: a binary search to the first
// such value, then the values that follow while they share the prefix.
func (mi *metaIndex) Prefix(key, prefix string) *roaring.Bitmap {
	tl := mi.keys[key]
	if tl == nil {
		return roaring.New()
	}
	vals := tl.values()
	i, _ := slices.BinarySearch(vals, prefix)
	var bms []*roaring.Bitmap
	for ; i < len(vals) && strings.HasPrefix(vals[i], prefix); i++ {
		bms = append(bms, tl.post[vals[i]])
	}
	switch len(bms) {
	case 0:
		return roaring.New()
	case 1:
		return bms[0].Clone()
	}
	return roaring.FastOr(bms...)
}

// All returns every live document.
func (mi *metaIndex) All() *roaring.Bitmap { return mi.live.Clone() }

// sortedKeys returns the metadata keys in increasing order.
func (mi *metaIndex) sortedKeys() []string {
	return slices.Sorted(maps.Keys(mi.keys))
}
