package dense

import (
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/index/dense/hnsw"
)

// Issue is one violated invariant of the index, with the documents involved
// (at most 20 listed, N in all).
type Issue struct {
	What string
	IDs  []string
	N    int
}

// issues collects the index's own Issues; "" stands for no document.
type issues struct{ hnsw.Issues[string] }

func (is *issues) add(what, id string) {
	if id == "" {
		is.Add(what, nil)
	} else {
		is.Add(what, &id)
	}
}

// Check verifies the index's invariants and returns every violation found
// (none for a sound index). Searches may run meanwhile.
//
//   - the graph's (see hnsw.Graph.Check): bounded, non-dangling neighbour
//     lists, consistent tombstones and key map, a sound entry point, finite
//     vectors, and every live passage reachable from the entry point;
//   - the document table: each live ID at its number, free numbers empty,
//     each document with at least one passage, the passage count right;
//   - passages: the graph holds exactly passages 0 to n-1 of each document
//     of n passages, and nothing else;
//   - the metadata index: the posting lists are exactly those the
//     documents' metadata gives, the live set is the live documents, and
//     each key's sorted value list holds exactly its values, in order.
func (ix *Index) Check() []Issue {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []Issue
	for _, gi := range ix.g.Check() {
		names := make([]string, len(gi.Keys))
		for i, key := range gi.Keys {
			names[i] = ix.keyName(key)
		}
		out = append(out, Issue{What: gi.What, IDs: names, N: gi.N})
	}
	var is issues
	ix.checkTable(&is)
	ix.checkPassages(&is)
	ix.checkMeta(&is)
	for _, e := range is.List() {
		out = append(out, Issue{What: e.What, IDs: e.Keys, N: e.N})
	}
	return out
}

// keyName names a graph key for an Issue: the document ID, with the
// passage when it is not 0.
func (ix *Index) keyName(key uint64) string {
	doc, p := splitKey(key)
	name := fmt.Sprintf("#%d", doc)
	if int(doc) < len(ix.docs) && ix.docs[doc].id != "" {
		name = ix.docs[doc].id
	}
	if p > 0 {
		name += fmt.Sprintf(" (passage %d)", p)
	}
	return name
}

func (ix *Index) checkTable(is *issues) {
	passages, free := 0, 0
	for num, e := range ix.docs {
		switch {
		case e.id == "":
			free++
			if e.passages != 0 || e.meta != nil {
				is.add("a free document number holds passages or metadata", fmt.Sprintf("#%d", num))
			}
		case ix.byID[e.id] != uint32(num):
			is.add("the ID map does not point at the document's number", e.id)
		case e.passages == 0:
			is.add("document with no passage", e.id)
		default:
			passages += int(e.passages)
		}
	}
	for id, num := range ix.byID {
		if int(num) >= len(ix.docs) || ix.docs[num].id != id {
			is.add("the ID map points at another document's number", id)
		}
	}
	if uint64(free) != ix.free.GetCardinality() {
		is.add(fmt.Sprintf("%d free document numbers, the free list holds %d", free, ix.free.GetCardinality()), "")
	}
	ix.free.Iterate(func(num uint32) bool {
		if int(num) >= len(ix.docs) || ix.docs[num].id != "" {
			is.add(fmt.Sprintf("the free list holds number %d, which is in use", num), "")
		}
		return true
	})
	if passages != ix.nPassages {
		is.add(fmt.Sprintf("the documents have %d passages, the passage count says %d", passages, ix.nPassages), "")
	}
}

func (ix *Index) checkPassages(is *issues) {
	keys := ix.g.Keys()
	held := make([]uint32, len(ix.docs)) // passages held, by document number
	for _, key := range keys {
		doc, p := splitKey(key)
		if int(doc) >= len(ix.docs) || ix.docs[doc].id == "" {
			is.add("the graph holds a passage of a document the index does not hold", ix.keyName(key))
			continue
		}
		if p >= ix.docs[doc].passages {
			is.add("the graph holds a passage beyond the document's count", ix.keyName(key))
			continue
		}
		held[doc]++
	}
	for id, num := range ix.byID {
		if int(num) < len(ix.docs) && held[num] != ix.docs[num].passages {
			is.add("the graph lacks passages of the document", id)
		}
	}
}

func (ix *Index) checkMeta(is *issues) {
	want := newMetaIndex()
	for num, e := range ix.docs {
		if e.id != "" {
			want.add(uint32(num), e.meta)
		}
	}
	if !want.live.Equals(ix.meta.live) {
		is.add("the metadata index's set of live documents differs from the documents", "")
	}
	for _, sp := range []struct {
		what      string
		num       bool
		got, want map[string]*termList
	}{{"metadata key", false, ix.meta.keys, want.keys}, {"numeric metadata key", true, ix.meta.nums, want.nums}} {
		keys := sortedKeys(sp.want)
		for k := range sp.got {
			if _, ok := sp.want[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			got, exp := sp.got[k], sp.want[k]
			if got == nil || exp == nil {
				is.add(fmt.Sprintf("%s %q: indexed %v, in the documents' metadata %v", sp.what, k, got != nil, exp != nil), "")
				continue
			}
			vals := got.values()
			if !slices.Equal(vals, exp.values()) {
				is.add(fmt.Sprintf("%s %q: the sorted value list differs from the documents' values", sp.what, k), "")
			}
			num := sp.num
			for v, bm := range exp.post {
				if g := got.post[v]; g == nil || !g.Equals(bm) {
					ix.postingIssue(is, k, v, num, g, bm)
				}
			}
			for v, g := range got.post {
				if _, ok := exp.post[v]; !ok {
					ix.postingIssue(is, k, v, num, g, roaring.New())
				}
			}
		}
	}
}

// postingIssue reports the documents on which the posting list of k=v
// (got, maybe nil) and the one the metadata gives (want) disagree; v is a
// filter.EncodeNumber key when num is set.
func (ix *Index) postingIssue(is *issues, k, v string, num bool, got, want *roaring.Bitmap) {
	if got == nil {
		got = roaring.New()
	}
	what := fmt.Sprintf("posting list %s=%s differs from the documents' metadata", k, v)
	if x, ok := filter.DecodeNumber(v); num && ok {
		what = fmt.Sprintf("posting list %s=%v (a number) differs from the documents' metadata", k, x)
	}
	roaring.Xor(got, want).Iterate(func(doc uint32) bool {
		is.add(what, ix.keyName(nodeKey(doc, 0)))
		return true
	})
}
