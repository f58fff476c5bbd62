// Package filter is anna's one language for restricting a search by the
// documents' metadata (Meta map[string]string). Both indexes evaluate it
// over posting lists (Eval); Match is the reference semantics they are
// tested against.
//
// # The language
//
// A Filter is a value built by constructors:
//
//	Eq(key, value)       Meta[key] == value
//	In(key, values...)   Meta[key] is one of values
//	Prefix(key, prefix)  Meta[key] starts with prefix (byte-wise)
//	And(fs...)           all of fs
//	Or(fs...)            any of fs
//	Not(f)               not f
//
// The zero Filter matches every document, and And() with no operands is the
// zero Filter. A document that lacks key matches no Eq, In or Prefix on
// that key (not even Eq(key, "")), so Not of one matches it. Keys and values
// are compared as exact bytes: no case folding, no trimming, no Unicode
// normalisation.
//
// # Invariants
//
// Keys are arbitrary non-empty strings except that they may not contain
// Separator (the NUL byte): indexes store a metadata pair as the one term
// key + Separator + value, and the first NUL of a term must end the key.
// Values may hold any bytes, NUL included. Validate rejects an empty key, a
// key holding Separator, In with no values and Or with no operands;
// Match and Eval still give such filters a meaning (an empty In or Or
// matches nothing) but the indexes refuse them. Metadata keys that contain
// Separator are not indexed: no valid filter can name them.
//
// A Filter is immutable: the constructors copy their arguments.
//
// # Evaluation over posting lists
//
// Eval computes the matching documents of one index (or one segment of it)
// as a roaring bitmap of its own document numbers, from that index's
// Postings: the documents holding key=value, those whose value of key has a
// prefix, and every live document. It never looks at a document's metadata
// one document at a time. Not is All minus its operand; And intersects its
// positive operands, smallest first, then subtracts its negated ones (And(a,
// Not(b)) costs one AndNot, not a complement); Or is one union. The result
// is always within All, so Postings may return bitmaps that still hold
// deleted documents; Eval never modifies a bitmap Postings returns.
//
// # JSON
//
// Parse reads and MarshalJSON writes:
//
//	{"eq": {"k": "v"}}
//	{"in": {"k": ["a", "b"]}}
//	{"prefix": {"k": "p"}}
//	{"and": [F, ...]}
//	{"or": [F, ...]}
//	{"not": F}
//	{"k": "v", "k2": "v2"}    shorthand: And(Eq(k, v), Eq(k2, v2))
//	{}, null                  the zero Filter (matches everything)
//
// An object with several members is the And of them, in document order, so
// {"k": "v", "or": [...]} is And(Eq(k, v), Or(...)); the member names eq,
// in, prefix, and, or and not are operators, never shorthand keys (write
// {"eq": {"and": "x"}} to filter on a key named "and"). {"eq": {"a": "1",
// "b": "2"}} is the And of both, likewise for in and prefix. Duplicate
// member names are refused. MarshalJSON writes the explicit form only, one
// member per object, so Parse(MarshalJSON(f)) rebuilds f exactly for every
// valid f whose strings are valid UTF-8 (JSON strings cannot carry other
// bytes; encoding/json replaces them with U+FFFD). Parse's errors, and
// Validate's, are *Error values naming the JSON path of the bad part, e.g.
// `filter $.and[1].in.color: no values`.
package filter

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
)

// Separator ends the key in an indexed metadata term key+Separator+value.
// Keys may not contain it; values may.
const Separator = "\x00"

type op uint8

const (
	opAll op = iota // the zero Filter
	opEq
	opIn
	opPrefix
	opAnd
	opOr
	opNot
)

// Filter is a predicate over a document's metadata. The zero Filter matches
// everything. Build one with Eq, In, Prefix, And, Or, Not or Parse.
type Filter struct {
	op   op
	key  string
	vals []string // opEq, opPrefix: one; opIn: the values
	subs []Filter // opAnd, opOr: the operands; opNot: one
}

// Eq matches documents whose value of key is value.
func Eq(key, value string) Filter { return Filter{op: opEq, key: key, vals: []string{value}} }

// In matches documents whose value of key is one of values.
func In(key string, values ...string) Filter {
	return Filter{op: opIn, key: key, vals: slices.Clone(values)}
}

// Prefix matches documents whose value of key starts with prefix.
func Prefix(key, prefix string) Filter {
	return Filter{op: opPrefix, key: key, vals: []string{prefix}}
}

// And matches documents that every f matches. And() is the zero Filter.
func And(fs ...Filter) Filter {
	if len(fs) == 0 {
		return Filter{}
	}
	return Filter{op: opAnd, subs: slices.Clone(fs)}
}

// Or matches documents that any f matches (none, for Or()).
func Or(fs ...Filter) Filter { return Filter{op: opOr, subs: slices.Clone(fs)} }

// Not matches documents that f does not match.
func Not(f Filter) Filter { return Filter{op: opNot, subs: []Filter{f}} }

// IsZero reports whether f is the zero Filter, which matches everything.
func (f Filter) IsZero() bool { return f.op == opAll }

// Match reports whether a document with metadata meta matches f (a nil
// meta has no keys). It is the reference semantics of Eval.
func (f Filter) Match(meta map[string]string) bool {
	switch f.op {
	case opAll:
		return true
	case opEq, opIn:
		v, ok := meta[f.key]
		return ok && slices.Contains(f.vals, v)
	case opPrefix:
		v, ok := meta[f.key]
		return ok && strings.HasPrefix(v, f.vals[0])
	case opAnd:
		for _, s := range f.subs {
			if !s.Match(meta) {
				return false
			}
		}
		return true
	case opOr:
		for _, s := range f.subs {
			if s.Match(meta) {
				return true
			}
		}
		return false
	case opNot:
		return !f.subs[0].Match(meta)
	}
	panic(fmt.Sprintf("filter: unknown op %d", f.op))
}

// Error is a bad part of a filter: Path is where, in JSON path notation
// over the filter's JSON form ($ is the whole filter), Msg what is wrong.
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string { return "filter " + e.Path + ": " + e.Msg }

// checkKey says what is wrong with a metadata key, "" if nothing.
func checkKey(key string) string {
	switch {
	case key == "":
		return "empty key"
	case strings.Contains(key, Separator):
		return fmt.Sprintf("key %q contains the separator NUL (\\x00), which ends the key in indexed metadata terms", key)
	}
	return ""
}

// Validate returns an *Error naming the first bad part of f: an empty key,
// a key holding Separator, In with no values, Or with no operands. The zero
// Filter is valid.
func (f Filter) Validate() error { return f.validate("$") }

func (f Filter) validate(path string) error {
	switch f.op {
	case opAll:
		return nil
	case opEq, opIn, opPrefix:
		at := path + "." + f.opName()
		if msg := checkKey(f.key); msg != "" {
			return &Error{at, msg}
		}
		if f.op == opIn && len(f.vals) == 0 {
			return &Error{at + pathKey(f.key), "in with no values"}
		}
		return nil
	case opAnd, opOr, opNot:
		at := path + "." + f.opName()
		if f.op == opOr && len(f.subs) == 0 {
			return &Error{at, "or with no filters"}
		}
		for i, s := range f.subs {
			p := at
			if f.op != opNot {
				p += "[" + strconv.Itoa(i) + "]"
			}
			if err := s.validate(p); err != nil {
				return err
			}
		}
		return nil
	}
	return &Error{path, fmt.Sprintf("unknown op %d", f.op)}
}

func (f Filter) opName() string {
	return [...]string{"all", "eq", "in", "prefix", "and", "or", "not"}[f.op]
}

// pathKey is the JSON path step to member key: .key for a plain name,
// ["..."] otherwise.
func pathKey(key string) string {
	if isPlain(key) {
		return "." + key
	}
	return "[" + strconv.Quote(key) + "]"
}

// isPlain reports whether s is an identifier-like name that reads
// unambiguously unquoted.
func isPlain(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// String returns f in a readable infix form, such as
// `(lang = "en" and not year in ["1999", "2000"])`; "all" for the zero
// Filter and "none" for Or().
func (f Filter) String() string {
	var b strings.Builder
	f.format(&b)
	return b.String()
}

func (f Filter) format(b *strings.Builder) {
	key := func() {
		if isPlain(f.key) {
			b.WriteString(f.key)
		} else {
			b.WriteString(strconv.Quote(f.key))
		}
	}
	switch f.op {
	case opAll:
		b.WriteString("all")
	case opEq:
		key()
		b.WriteString(" = " + strconv.Quote(f.vals[0]))
	case opIn:
		key()
		b.WriteString(" in [")
		for i, v := range f.vals {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(v))
		}
		b.WriteString("]")
	case opPrefix:
		key()
		b.WriteString(" prefix " + strconv.Quote(f.vals[0]))
	case opAnd, opOr:
		if len(f.subs) == 0 {
			b.WriteString("none")
			return
		}
		b.WriteString("(")
		for i, s := range f.subs {
			if i > 0 {
				b.WriteString(" " + f.opName() + " ")
			}
			s.format(b)
		}
		b.WriteString(")")
	case opNot:
		b.WriteString("not ")
		f.subs[0].format(b)
	}
}

// Postings is what Eval reads: one index's (or segment's) posting lists of
// metadata, by its own document numbers. It is an alias of an interface
// literal, not a defined type: another package that declares the same
// alias names the identical type, so Filter satisfies that package's
// interface{ Eval(Postings) *roaring.Bitmap } without importing filter.
// (Had either side a defined interface type, the two Eval signatures would
// differ and Filter would not satisfy it.)
//
// Term and Prefix may include documents that All does not (deleted ones):
// Eval intersects with All. A nil bitmap is an empty one. Eval does not
// modify the bitmaps it is given, so implementations may return shared
// ones.
type Postings = interface {
	// Term returns the documents with key=value (nil or empty: none).
	Term(key, value string) *roaring.Bitmap
	// Prefix returns the documents with a value of key starting with
	// prefix.
	Prefix(key, prefix string) *roaring.Bitmap
	// All returns every live document (Not needs it).
	All() *roaring.Bitmap
}

// Eval returns the live documents of p that f matches, as a new bitmap the
// caller owns: a subset of p.All(), equal to the documents d of p.All()
// for which Match(meta of d) holds. It reads only p's posting lists.
func (f Filter) Eval(p Postings) *roaring.Bitmap {
	all := nonNil(p.All())
	if f.op == opAll {
		return all.Clone()
	}
	return roaring.And(f.eval(p, all), all)
}

// eval returns the matching documents, possibly a bitmap of p's that must
// not be modified, possibly holding documents outside all.
func (f Filter) eval(p Postings, all *roaring.Bitmap) *roaring.Bitmap {
	switch f.op {
	case opAll:
		return all
	case opEq:
		return nonNil(p.Term(f.key, f.vals[0]))
	case opIn:
		bms := make([]*roaring.Bitmap, 0, len(f.vals))
		for _, v := range f.vals {
			if bm := p.Term(f.key, v); bm != nil && !bm.IsEmpty() {
				bms = append(bms, bm)
			}
		}
		if len(bms) == 1 {
			return bms[0]
		}
		return roaring.FastOr(bms...)
	case opPrefix:
		return nonNil(p.Prefix(f.key, f.vals[0]))
	case opAnd:
		return f.evalAnd(p, all)
	case opOr:
		bms := make([]*roaring.Bitmap, len(f.subs))
		for i, s := range f.subs {
			bms[i] = s.eval(p, all)
		}
		if len(bms) == 1 {
			return bms[0]
		}
		return roaring.FastOr(bms...)
	case opNot:
		return roaring.AndNot(all, f.subs[0].eval(p, all))
	}
	panic(fmt.Sprintf("filter: unknown op %d", f.op))
}

// evalAnd intersects the positive operands, smallest first, stopping once
// the intersection is empty, then subtracts the negated operands.
func (f Filter) evalAnd(p Postings, all *roaring.Bitmap) *roaring.Bitmap {
	var pos []*roaring.Bitmap
	var neg []Filter
	for _, s := range f.subs {
		if s.op == opNot {
			neg = append(neg, s.subs[0])
			continue
		}
		bm := s.eval(p, all)
		if bm.IsEmpty() {
			return bm
		}
		pos = append(pos, bm)
	}
	var acc *roaring.Bitmap // owned once set
	switch len(pos) {
	case 0:
		acc = all.Clone()
	case 1:
		acc = pos[0].Clone()
	default:
		slices.SortFunc(pos, func(a, b *roaring.Bitmap) int {
			return cmp.Compare(a.GetCardinality(), b.GetCardinality())
		})
		acc = roaring.And(pos[0], pos[1])
		for _, bm := range pos[2:] {
			if acc.IsEmpty() {
				break
			}
			acc.And(bm)
		}
	}
	for _, s := range neg {
		if acc.IsEmpty() {
			break
		}
		acc.AndNot(s.eval(p, all))
	}
	return acc
}

func nonNil(bm *roaring.Bitmap) *roaring.Bitmap {
	if bm == nil {
		return roaring.New()
	}
	return bm
}
