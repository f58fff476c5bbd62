package lexical

import (
	"bytes"
	"context"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/index/scorch"
	bindex "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/storage"
)

// Metadata filters (see the package doc): each document's Meta and
// MetaValues are indexed in the field fieldMeta, one term per string value
// key+filter.Separator+value and one per number value filter.Separator+
// key+filter.Separator+filter.EncodeNumber(x) (no string term starts with
// NUL, since keys are not empty, so numbers never meet a string's prefix
// or range), and a filter.Filter is evaluated per segment from that
// field's term dictionary and postings.

// metaTokens returns the terms of a document's metadata, each once, in
// byte order, skipping keys that hold filter.Separator (no valid filter
// can name them, and their terms would read as another key's).
func metaTokens(d storage.Doc) analyzed {
	var terms []string
	filter.EachValue(d.Meta, d.MetaValues, func(k string, v filter.Value) {
		if strings.Contains(k, filter.Separator) {
			return
		}
		if x, ok := v.Number(); ok {
			terms = append(terms, string(numberTerm(nil, k, filter.EncodeNumber(x))))
			return
		}
		s, _ := v.Str()
		terms = append(terms, string(metaTerm(nil, k, s)))
	})
	slices.Sort(terms)
	terms = slices.Compact(terms)
	out := make(analyzed, len(terms))
	for i, t := range terms {
		out[i] = &analysis.Token{Term: []byte(t), Position: i + 1, Type: analysis.AlphaNumeric}
	}
	return out
}

// metaTerm appends the term of the string key=value to dst.
func metaTerm(dst []byte, key, value string) []byte {
	dst = append(dst, key...)
	dst = append(dst, filter.Separator...)
	return append(dst, value...)
}

// numberTerm appends the term of a number of key, by its
// filter.EncodeNumber key enc (or a prefix of one), to dst.
func numberTerm(dst []byte, key, enc string) []byte {
	dst = append(dst, filter.Separator...)
	return metaTerm(dst, key, enc)
}

// segPostings is filter.Postings over one scorch segment's metadata field,
// by segment-local document number. Term and Prefix return the postings as
// stored, deleted documents included (filter.Eval intersects with All);
// the first error Bleve gives is kept in err, and the bitmaps returned
// after it are empty.
type segPostings struct {
	ss   *scorch.SegmentSnapshot
	dict segment.TermDictionary // opened by the first Term or Prefix
	all  *roaring.Bitmap
	term []byte
	err  error
}

func newSegPostings(ss *scorch.SegmentSnapshot) *segPostings {
	all := roaring.New()
	all.AddRange(0, ss.Segment().Count())
	if del := ss.Deleted(); del != nil {
		all.AndNot(del)
	}
	return &segPostings{ss: ss, all: all}
}

func (p *segPostings) All() *roaring.Bitmap { return p.all }

// open opens the metadata field's dictionary, reporting whether it could.
func (p *segPostings) open() bool {
	if p.dict == nil && p.err == nil {
		d, err := p.ss.Segment().Dictionary(fieldMeta)
		if err != nil {
			p.err = fmt.Errorf("field %s dictionary: %w", fieldMeta, err)
		}
		p.dict = d
	}
	return p.err == nil
}

func (p *segPostings) Term(key, value string) *roaring.Bitmap {
	p.term = metaTerm(p.term[:0], key, value)
	return p.postings(p.term)
}

// Prefix unions the postings of the string terms of key starting with
// prefix: the dictionary range [key+Separator+prefix, the next prefix).
func (p *segPostings) Prefix(key, prefix string) *roaring.Bitmap {
	start := metaTerm(nil, key, prefix)
	return p.span(start, prefixEnd(start))
}

// Range unions the postings of the string terms of key with a value in
// [lo, hi) (hi "": every value from lo on).
func (p *segPostings) Range(key, lo, hi string) *roaring.Bitmap {
	start := metaTerm(nil, key, lo)
	if hi == "" {
		return p.span(start, prefixEnd(metaTerm(nil, key, "")))
	}
	return p.span(start, metaTerm(nil, key, hi))
}

// NumberRange unions the postings of the number terms of key with an
// EncodeNumber key in [lo, hi) (hi "": every one from lo on).
func (p *segPostings) NumberRange(key, lo, hi string) *roaring.Bitmap {
	start := numberTerm(nil, key, lo)
	if hi == "" {
		return p.span(start, prefixEnd(numberTerm(nil, key, "")))
	}
	return p.span(start, numberTerm(nil, key, hi))
}

// span unions the postings of the terms in the dictionary range [start,
// end) (end nil: no end): a range iterator over the term dictionary (an
// FST), visiting only the matching terms.
func (p *segPostings) span(start, end []byte) *roaring.Bitmap {
	if !p.open() || (end != nil && bytes.Compare(start, end) >= 0) {
		return roaring.New()
	}
	var it segment.DictionaryIterator
	if oc, ok := p.dict.(omitCountDict); ok {
		it = oc.AutomatonIteratorOmitCount(nil, start, end)
	} else {
		it = p.dict.AutomatonIterator(nil, start, end)
	}
	var bms []*roaring.Bitmap
	for p.err == nil {
		e, err := it.Next()
		if err != nil {
			p.err = fmt.Errorf("metadata terms from %q: %w", start, err)
			break
		}
		if e == nil {
			break
		}
		if bm := p.postings([]byte(e.Term)); !bm.IsEmpty() {
			bms = append(bms, bm)
		}
	}
	if len(bms) == 1 {
		return bms[0]
	}
	return filter.Union(bms...)
}

// omitCountDict is implemented by zap's dictionaries: a range iterator
// that does not read each term's postings to count them.
type omitCountDict interface {
	AutomatonIteratorOmitCount(a segment.Automaton, startKeyInclusive, endKeyExclusive []byte) segment.DictionaryIterator
}

// prefixEnd returns the least key greater than every key starting with p,
// nil if there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// postings returns the documents of term as a bitmap, not to be modified:
// zap's own postings bitmap when the iterator exposes it (no copy, no walk),
// else one built by walking the postings.
func (p *segPostings) postings(term []byte) *roaring.Bitmap {
	bm := roaring.New()
	if !p.open() {
		return bm
	}
	pl, err := p.dict.PostingsList(term, nil, nil)
	if err != nil {
		p.err = fmt.Errorf("postings of metadata term %q: %w", term, err)
		return bm
	}
	it := pl.Iterator(false, false, false, nil)
	if o, ok := it.(segment.OptimizablePostingsIterator); ok {
		if actual := o.ActualBitmap(); actual != nil {
			return actual
		}
		if d, ok := o.DocNum1Hit(); ok {
			bm.Add(uint32(d))
			return bm
		}
	}
	for {
		posting, err := it.Next()
		if err != nil {
			p.err = fmt.Errorf("postings of metadata term %q: %w", term, err)
			return roaring.New()
		}
		if posting == nil {
			return bm
		}
		bm.Add(uint32(posting.Number()))
	}
}

// matching evaluates f on every segment of s: the segment-local numbers of
// the live documents f matches, per segment.
func (s *snapshot) matching(ctx context.Context, f filter.Filter) ([]*roaring.Bitmap, error) {
	out := make([]*roaring.Bitmap, len(s.segs))
	for i, ss := range s.segs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p := newSegPostings(ss)
		out[i] = f.Eval(p)
		if p.err != nil {
			return nil, p.err
		}
	}
	return out, nil
}

// docSet is a set of one segment's documents by local number, as a
// bitset: testing a posting against it costs a shift and a mask, where a
// roaring bitmap's Contains costs a search. A nil docSet is no
// restriction; an empty non-nil one holds no document.
type docSet []uint64

func (s docSet) has(d uint64) bool {
	i := d >> 6
	return i < uint64(len(s)) && s[i]&(1<<(d&63)) != 0
}

// next returns the least document of s at or after d, noDoc if none.
func (s docSet) next(d uint64) uint64 {
	i := d >> 6
	if i >= uint64(len(s)) {
		return noDoc
	}
	w := s[i] &^ (1<<(d&63) - 1)
	for w == 0 {
		if i++; i >= uint64(len(s)) {
			return noDoc
		}
		w = s[i]
	}
	return i<<6 + uint64(bits.TrailingZeros64(w))
}

// allowed returns what scoring may visit in each segment under filter f:
// nil where f keeps every live document (the deleted ones are skipped
// anyway), else the documents f matches; and how many live documents f
// matches in all.
func (s *snapshot) allowed(ctx context.Context, f filter.Filter) ([]docSet, uint64, error) {
	bms, err := s.matching(ctx, f)
	if err != nil {
		return nil, 0, err
	}
	allow := make([]docSet, len(s.segs))
	var n uint64
	for i, ss := range s.segs {
		c := bms[i].GetCardinality()
		n += c
		if c < ss.Count() {
			if allow[i] = docSet(bms[i].ToDense()); allow[i] == nil {
				allow[i] = docSet{} // none
			}
		}
	}
	return allow, n, nil
}

// openSnapshot opens a reader on the index as it is now, and the snapshot
// of its segments; the caller closes the reader.
func (ix *Index) openSnapshot() (*snapshot, bindex.IndexReader, error) {
	r, err := ix.bi.Advanced()
	if err != nil {
		return nil, nil, err
	}
	reader, err := r.Reader()
	if err != nil {
		return nil, nil, err
	}
	snap, err := newSnapshot(reader)
	if err != nil {
		reader.Close()
		return nil, nil, err
	}
	return snap, reader, nil
}

// CountMatching returns how many indexed documents f matches (all of them
// for the zero Filter), from the metadata postings of one snapshot.
func (ix *Index) CountMatching(ctx context.Context, f filter.Filter) (uint64, error) {
	ctx = safe.Ctx(ctx)
	if err := f.Validate(); err != nil {
		return 0, fmt.Errorf("lexical: count matching: %w", err)
	}
	snap, reader, err := ix.openSnapshot()
	if err != nil {
		return 0, fmt.Errorf("lexical: count matching: %w", err)
	}
	defer reader.Close()
	if f.IsZero() {
		return snap.live, nil
	}
	allow, err := snap.matching(ctx, f)
	if err != nil {
		return 0, fmt.Errorf("lexical: count matching %s: %w", f, err)
	}
	var n uint64
	for _, bm := range allow {
		n += bm.GetCardinality()
	}
	return n, nil
}

// ForEachMatching calls fn with the ID of every indexed document f matches
// (every document for the zero Filter), in no particular order, from one
// snapshot of the index, stopping at fn's first error.
func (ix *Index) ForEachMatching(ctx context.Context, f filter.Filter, fn func(id string) error) error {
	ctx = safe.Ctx(ctx)
	if err := f.Validate(); err != nil {
		return fmt.Errorf("lexical: matching: %w", err)
	}
	snap, reader, err := ix.openSnapshot()
	if err != nil {
		return fmt.Errorf("lexical: matching: %w", err)
	}
	defer reader.Close()
	allow, err := snap.matching(ctx, f)
	if err != nil {
		return fmt.Errorf("lexical: matching %s: %w", f, err)
	}
	n := 0
	for i, bm := range allow {
		it := bm.Iterator()
		for it.HasNext() {
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			id, err := snap.segs[i].DocID(uint64(it.Next()))
			if err != nil {
				return fmt.Errorf("lexical: matching: %w", err)
			}
			if err := fn(string(id)); err != nil {
				return err
			}
		}
	}
	return nil
}
