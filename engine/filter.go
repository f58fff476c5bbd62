package engine

import "github.com/anna-search/anna/filter"

// Filter restricts a search to the documents whose Meta it matches
// (SearchOptions.Filter). The zero Filter matches every document. Build one
// with Eq, In, Prefix, And, Or and Not, or read one from JSON with
// ParseFilter; a Filter prints itself (String) and marshals to the JSON
// ParseFilter reads.
//
// A document without the key matches no Eq, In or Prefix on it (so Not of
// one matches it); keys and values compare as exact bytes. Both indexes
// evaluate a filter over their posting lists, before ranking: a filtered
// search returns K documents whenever K matching documents are found by
// the query, not the matching part of an unfiltered top K.
type Filter = filter.Filter

// Eq matches documents whose Meta[key] is value.
func Eq(key, value string) Filter { return filter.Eq(key, value) }

// In matches documents whose Meta[key] is one of values.
func In(key string, values ...string) Filter { return filter.In(key, values...) }

// Prefix matches documents whose Meta[key] starts with prefix.
func Prefix(key, prefix string) Filter { return filter.Prefix(key, prefix) }

// And matches documents every one of fs matches (And() matches all).
func And(fs ...Filter) Filter { return filter.And(fs...) }

// Or matches documents any of fs matches.
func Or(fs ...Filter) Filter { return filter.Or(fs...) }

// Not matches documents f does not match.
func Not(f Filter) Filter { return filter.Not(f) }

// ParseFilter reads a filter written in JSON:
//
//	{"lang": "en", "year": "2024"}            lang = en and year = 2024
//	{"in": {"lang": ["en", "de"]}}            lang is en or de
//	{"prefix": {"path": "docs/"}}             path starts with docs/
//	{"or": [F, ...]}  {"and": [F, ...]}  {"not": F}
//
// Its errors name the JSON path of the bad part
// (`filter $.or[1].in.lang: no values`).
func ParseFilter(data []byte) (Filter, error) { return filter.Parse(data) }
