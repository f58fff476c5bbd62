package engine

import (
	"context"
	"fmt"
	"maps"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/clip"
	"github.com/anna-search/anna/internal/safe"
)

// Filter restricts a search to the documents whose metadata (Meta and
// MetaValues) it matches (SearchOptions.Filter). The zero Filter matches
// every document. Build one with Eq, In, Prefix, Gt, Gte, Lt, Lte, Range,
// And, Or and Not, or read one from JSON with ParseFilter; a Filter prints
// itself (String) and marshals to the JSON ParseFilter reads.
//
// A document without the key matches no Eq, In, Prefix or range on it (so
// Not of one matches it). A list value matches when any of its elements
// does: Eq("tags", "a") matches tags ["a", "b"]. Strings compare as exact
// bytes, and their ranges are lexicographic (ISO dates order as dates);
// a number compares numerically with a filter value or bound that reads as
// a number (Eq("year", "1960"), Gte("year", "1960")). Both indexes
// evaluate a filter over their posting lists, before ranking: a filtered
// search returns K documents whenever K matching documents are found by
// the query, not the matching part of an unfiltered top K. See package
// filter for the whole language.
type Filter = filter.Filter

// Value is a metadata value of Document.MetaValues: a number, a list of
// strings and numbers, or a string (stored in Meta).
type Value = filter.Value

// StringValue returns s as a Value.
func StringValue(s string) Value { return filter.StringValue(s) }

// NumberValue returns x as a Value, which filters compare as a number.
func NumberValue(x float64) Value { return filter.NumberValue(x) }

// ListValue returns the list of vs: a multi-valued key.
func ListValue(vs ...Value) Value { return filter.ListValue(vs...) }

// StringsValue returns the list of the strings ss: a multi-valued key
// such as tags.
func StringsValue(ss ...string) Value { return filter.StringsValue(ss...) }

// Eq matches documents with a value of key equal to value (a number equal
// to it, when value reads as a number).
func Eq(key, value string) Filter { return filter.Eq(key, value) }

// In matches documents with a value of key equal to one of values.
func In(key string, values ...string) Filter { return filter.In(key, values...) }

// Prefix matches documents with a string value of key that starts with
// prefix.
func Prefix(key, prefix string) Filter { return filter.Prefix(key, prefix) }

// Gt matches documents with a value of key greater than bound: a string
// after it byte-wise, or a number above it when bound reads as a number.
func Gt(key, bound string) Filter { return filter.Gt(key, bound) }

// Gte matches documents with a value of key greater than or equal to
// bound: Gte("year", "1960"), Gte("date", "2024-01-01").
func Gte(key, bound string) Filter { return filter.Gte(key, bound) }

// Lt matches documents with a value of key less than bound.
func Lt(key, bound string) Filter { return filter.Lt(key, bound) }

// Lte matches documents with a value of key less than or equal to bound.
func Lte(key, bound string) Filter { return filter.Lte(key, bound) }

// Range matches documents with a value of key in [lo, hi): at least lo,
// below hi. Range("year", "1960", "1970") is the sixties.
func Range(key, lo, hi string) Filter { return filter.Range(key, lo, hi) }

// And matches documents every one of fs matches (And() matches all).
func And(fs ...Filter) Filter { return filter.And(fs...) }

// Or matches documents any of fs matches.
func Or(fs ...Filter) Filter { return filter.Or(fs...) }

// Not matches documents f does not match.
func Not(f Filter) Filter { return filter.Not(f) }

// ParseFilter reads a filter written in JSON:
//
//	{"lang": "en", "year": 2024}              lang = en and year = 2024
//	{"in": {"lang": ["en", "de"]}}            lang is en or de
//	{"prefix": {"path": "docs/"}}             path starts with docs/
//	{"gte": {"year": 1960}}                   year >= 1960 (also gt, lt, lte)
//	{"range": {"year": {"gte": 1960, "lt": 1970}}}
//	{"or": [F, ...]}  {"and": [F, ...]}  {"not": F}
//
// Its errors name the JSON path of the bad part
// (`filter $.or[1].in.lang: no values`).
func ParseFilter(data []byte) (Filter, error) { return filter.Parse(data) }

// UnknownKeys returns the metadata keys f names that no document in the
// directory has, sorted: a filter on one matches nothing (or, under Not,
// everything), which is most often a misspelt key. A search with such a
// filter is not an error; tools warn (annactl search does, on stderr). It
// reads the dense index's metadata postings, in memory. The Weaviate
// backend keeps none here: with it UnknownKeys returns nil.
func (e *Engine) UnknownKeys(f Filter) ([]string, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if e.via != nil {
		return e.via.unknownKeys(context.Background(), f)
	}
	l := e.local()
	if l == nil {
		return nil, nil
	}
	ix := l.graph()
	if ix == nil {
		return nil, nil
	}
	var out []string
	for _, k := range f.Keys() {
		if !ix.HasKey(k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// MetadataKey describes one metadata key of the stored documents
// (MetadataKeys).
type MetadataKey struct {
	Key      string
	Values   int             // distinct values
	Numeric  bool            // some value is a number
	Min, Max float64         // of the number values, when Numeric
	Top      []MetadataValue // the string values held by the most documents, most first
}

// MetadataValue is a metadata value and how many documents hold it.
type MetadataValue struct {
	Value     string
	Documents int
}

// MetadataKeys lists the metadata keys of the stored documents in byte
// order, with their values: how many, the range of the numbers, and up to
// top of the string values held by the most documents (none for a key of
// more than 10,000 values, such as a path). It reads the dense index's
// postings, in memory; the Weaviate backend has none (ErrUnsupported).
func (e *Engine) MetadataKeys(ctx context.Context, top int) (_ []MetadataKey, err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if e.via != nil {
		return e.via.metadataKeys(ctx, top)
	}
	l := e.local()
	if l == nil {
		return nil, fmt.Errorf("engine: metadata keys: %w on the Weaviate backend", ErrUnsupported)
	}
	ix := l.graph()
	if ix == nil {
		return nil, nil
	}
	var out []MetadataKey
	for _, ks := range ix.MetaKeys(top) {
		if ks.Values == 0 {
			continue
		}
		k := MetadataKey{Key: ks.Key, Values: ks.Values, Numeric: ks.Numeric, Min: ks.Min, Max: ks.Max}
		for _, v := range ks.Top {
			k.Top = append(k.Top, MetadataValue{Value: v.Value, Documents: v.Docs})
		}
		out = append(out, k)
	}
	return out, nil
}

// maxMeta bounds a metadata key or string (the dense index's limit).
const maxMeta = 1 << 20

// checkMeta says what is wrong with d's metadata: an empty key, a key in
// both Meta and MetaValues, a non-finite number, a key or string over
// maxMeta bytes.
func checkMeta(d Document) error {
	for k, v := range d.Meta {
		switch {
		case k == "":
			return fmt.Errorf("metadata: empty key")
		case len(k) > maxMeta || len(v) > maxMeta:
			return fmt.Errorf("metadata key %s: key or value longer than %d bytes", clip.Quote(k), maxMeta)
		}
		if _, ok := d.MetaValues[k]; ok {
			return fmt.Errorf("metadata key %s is in both Meta and MetaValues", clip.Quote(k))
		}
	}
	for k, v := range d.MetaValues {
		switch {
		case k == "":
			return fmt.Errorf("metadata: empty key")
		case len(k) > maxMeta:
			return fmt.Errorf("metadata key %s: longer than %d bytes", clip.Quote(k), maxMeta)
		}
		if err := v.Validate(); err != nil {
			return fmt.Errorf("metadata key %s: %w", clip.Quote(k), err)
		}
		for _, e := range v.Values() {
			if s, ok := e.Str(); ok && len(s) > maxMeta {
				return fmt.Errorf("metadata key %s: a value longer than %d bytes", clip.Quote(k), maxMeta)
			}
		}
	}
	return nil
}

// canonicalMeta returns d with its MetaValues strings moved into Meta (in
// new maps; d's are not modified), the form documents are stored in.
func canonicalMeta(d Document) Document {
	moved := false
	for _, v := range d.MetaValues {
		if _, ok := v.Str(); ok {
			moved = true
			break
		}
	}
	if !moved {
		return d
	}
	meta := maps.Clone(d.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	values := map[string]Value{}
	for k, v := range d.MetaValues {
		if s, ok := v.Str(); ok {
			meta[k] = s
		} else {
			values[k] = v
		}
	}
	if len(values) == 0 {
		values = nil
	}
	d.Meta, d.MetaValues = meta, values
	return d
}
