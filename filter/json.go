package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/anna-search/anna/internal/clip"
)

// MarshalJSON writes f in the explicit form (package doc), one member per
// object; the zero Filter is {}. It never fails.
func (f Filter) MarshalJSON() ([]byte, error) {
	return f.appendJSON(nil), nil
}

func (f Filter) appendJSON(b []byte) []byte {
	if f.op == opAll {
		return append(b, "{}"...)
	}
	b = append(b, `{"`...)
	b = append(b, f.opName()...)
	b = append(b, `":`...)
	switch f.op {
	case opEq, opPrefix:
		b = append(b, '{')
		b = appendString(b, f.key)
		b = append(b, ':')
		b = appendString(b, f.vals[0])
		b = append(b, '}')
	case opRange:
		b = append(b, '{')
		b = appendString(b, f.key)
		b = append(b, ':')
		switch f.opName() {
		case "gt", "gte":
			b = appendString(b, f.vals[0])
		case "lt", "lte":
			b = appendString(b, f.vals[1])
		default: // {"gte": lo, "lt": hi}
			b = append(b, `{"`...)
			b = append(b, map[bool]string{true: "gte", false: "gt"}[f.bounds&loIncl != 0]...)
			b = append(b, `":`...)
			b = appendString(b, f.vals[0])
			b = append(b, `,"`...)
			b = append(b, map[bool]string{true: "lte", false: "lt"}[f.bounds&hiIncl != 0]...)
			b = append(b, `":`...)
			b = appendString(b, f.vals[1])
			b = append(b, '}')
		}
		b = append(b, '}')
	case opIn:
		b = append(b, '{')
		b = appendString(b, f.key)
		b = append(b, ":["...)
		for i, v := range f.vals {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, v)
		}
		b = append(b, "]}"...)
	case opAnd, opOr:
		b = append(b, '[')
		for i, s := range f.subs {
			if i > 0 {
				b = append(b, ',')
			}
			b = s.appendJSON(b)
		}
		b = append(b, ']')
	case opNot:
		b = f.subs[0].appendJSON(b)
	}
	return append(b, '}')
}

func appendString(b []byte, s string) []byte {
	q, err := json.Marshal(s)
	if err != nil {
		panic(err) // a string always encodes
	}
	return append(b, q...)
}

// UnmarshalJSON is Parse, for Filter fields of JSON documents.
func (f *Filter) UnmarshalJSON(data []byte) error {
	g, err := Parse(data)
	if err != nil {
		return err
	}
	*f = g
	return nil
}

// Parse reads a filter in the JSON form of the package doc. Errors are
// *Error values naming the JSON path of the bad part; the filter returned
// is valid (Validate returns nil). Its time and memory are linear in the
// length of data: JSON nested deeper than a filter of MaxDepth can be is
// refused as it is read.
func Parse(data []byte) (Filter, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var w where
	w.push(stepRoot, "$", 0)
	n, err := readNode(dec, &w, 0)
	if err != nil {
		return Filter{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Filter{}, &Error{"$", "data after the filter"}
	}
	if n.kind == kindNull {
		return Filter{}, nil
	}
	f, err := fromNode(n, &w)
	if err != nil {
		return Filter{}, err
	}
	if err := f.Validate(); err != nil {
		return Filter{}, err
	}
	return f, nil
}

// maxJSONDepth is the deepest JSON a filter of MaxDepth nests to: an and
// or or is an object and an array, and a leaf ({"range": {"k": {"gte":
// ...}}}) three objects.
const maxJSONDepth = 2*MaxDepth + 4

// node is a JSON value with object members in document order.
type node struct {
	kind kind
	str  string   // kindString; kindOther: the token, for messages
	keys []string // kindObject
	vals []node   // kindObject: the members' values; kindArray: elements
}

type kind uint8

const (
	kindNull kind = iota
	kindObject
	kindArray
	kindString
	kindOther // number or boolean
)

func (k kind) String() string {
	return [...]string{"null", "an object", "an array", "a string", "a number or boolean"}[k]
}

// readNode reads the next JSON value from dec, depth arrays and objects
// deep; w is where it is, for errors.
func readNode(dec *json.Decoder, w *where, depth int) (node, error) {
	tok, err := dec.Token()
	if err != nil {
		return node{}, syntaxError(dec, w, err)
	}
	switch t := tok.(type) {
	case nil:
		return node{kind: kindNull}, nil
	case string:
		return node{kind: kindString, str: t}, nil
	case json.Number:
		return node{kind: kindOther, str: t.String()}, nil
	case bool:
		return node{kind: kindOther, str: strconv.FormatBool(t)}, nil
	case json.Delim:
		if depth >= maxJSONDepth {
			return node{}, w.errorf("nested deeper than a filter may be (filters nest at most %d deep)", MaxDepth)
		}
		switch t {
		case '{':
			n := node{kind: kindObject}
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return node{}, syntaxError(dec, w, err)
				}
				k := kt.(string) // the decoder only yields strings as member names
				if seen[k] {
					return node{}, w.errorf("duplicate member %s", clip.Quote(k))
				}
				seen[k] = true
				w.push(stepKey, k, 0)
				v, err := readNode(dec, w, depth+1)
				w.pop()
				if err != nil {
					return node{}, err
				}
				n.keys = append(n.keys, k)
				n.vals = append(n.vals, v)
			}
			if _, err := dec.Token(); err != nil { // '}'
				return node{}, syntaxError(dec, w, err)
			}
			return n, nil
		case '[':
			n := node{kind: kindArray}
			for i := 0; dec.More(); i++ {
				w.push(stepIndex, "", i)
				v, err := readNode(dec, w, depth+1)
				w.pop()
				if err != nil {
					return node{}, err
				}
				n.vals = append(n.vals, v)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return node{}, syntaxError(dec, w, err)
			}
			return n, nil
		}
	}
	return node{}, w.errorf("unexpected JSON token %v", tok)
}

func syntaxError(dec *json.Decoder, w *where, err error) error {
	if errors.Is(err, io.EOF) {
		return w.errorf("unexpected end of JSON")
	}
	return w.errorf("invalid JSON at byte %d: %s", dec.InputOffset(), clip.Bytes(err.Error(), 200))
}

// fromNode turns an object node at w into a Filter: the And of its
// members, each an operator or shorthand key: value.
func fromNode(n node, w *where) (Filter, error) {
	if n.kind != kindObject {
		return Filter{}, w.errorf("want a filter object, got %s", n.kind)
	}
	var fs []Filter
	for i, k := range n.keys {
		v := n.vals[i]
		w.push(stepKey, k, 0)
		var (
			f   Filter
			err error
		)
		switch k {
		case "eq", "prefix", "in":
			f, err = fromLeaves(k, v, w)
		case "gt", "gte", "lt", "lte", "range":
			if v.kind != kindObject { // a shorthand key older than the operator
				f, err = shorthand(k, v, w)
				break
			}
			f, err = fromLeaves(k, v, w)
		case "and", "or":
			f, err = fromList(k, v, w)
		case "not":
			f, err = fromNode(v, w)
			f = Not(f)
		default:
			f, err = shorthand(k, v, w)
		}
		w.pop()
		if err != nil {
			return Filter{}, err
		}
		fs = append(fs, f)
	}
	if len(fs) == 1 {
		return fs[0], nil
	}
	return And(fs...), nil
}

// shorthand reads the member key: value of a filter object, Eq(key, value).
func shorthand(k string, v node, w *where) (Filter, error) {
	if msg := checkKey(k); msg != "" {
		return Filter{}, w.errorf("%s", msg)
	}
	if !v.scalar() {
		return Filter{}, w.errorf(`want a string (shorthand for {"eq": {%s: "..."}}), got %s`, clip.Quote(k), v.kind)
	}
	return Eq(k, v.str), nil
}

// scalar reports whether n is a value a filter compares with: a string, or
// a number or boolean, read as the text it is written as.
func (n node) scalar() bool { return n.kind == kindString || n.kind == kindOther }

// fromLeaves reads the operand of eq, prefix, in, gt, gte, lt, lte or
// range: an object of key: value (in: key: [values]; range: key: {bounds})
// members, the And of them when several.
func fromLeaves(op string, n node, w *where) (Filter, error) {
	if n.kind != kindObject {
		want := `{"key": "value"}`
		if op == "in" {
			want = `{"key": ["value", ...]}`
		}
		return Filter{}, w.errorf("want an object %s, got %s", want, n.kind)
	}
	if len(n.keys) == 0 {
		return Filter{}, w.errorf("%s with no key", op)
	}
	var fs []Filter
	for i, k := range n.keys {
		w.push(stepKey, k, 0)
		f, err := fromLeaf(op, k, n.vals[i], w)
		w.pop()
		if err != nil {
			return Filter{}, err
		}
		fs = append(fs, f)
	}
	if len(fs) == 1 {
		return fs[0], nil
	}
	return And(fs...), nil
}

// fromLeaf reads one member k: v of op's operand, at w.
func fromLeaf(op, k string, v node, w *where) (Filter, error) {
	if msg := checkKey(k); msg != "" {
		return Filter{}, w.errorf("%s", msg)
	}
	switch op {
	case "in":
		if v.kind != kindArray {
			return Filter{}, w.errorf("want an array of strings, got %s", v.kind)
		}
		if len(v.vals) == 0 {
			return Filter{}, w.errorf("in with no values")
		}
		vals := make([]string, len(v.vals))
		for j, e := range v.vals {
			if !e.scalar() {
				w.push(stepIndex, "", j)
				defer w.pop()
				return Filter{}, w.errorf("want a string, got %s", e.kind)
			}
			vals[j] = e.str
		}
		return In(k, vals...), nil
	case "range":
		return fromBounds(k, v, w)
	}
	if !v.scalar() {
		return Filter{}, w.errorf("want a string, got %s", v.kind)
	}
	switch op {
	case "eq":
		return Eq(k, v.str), nil
	case "prefix":
		return Prefix(k, v.str), nil
	case "gt":
		return Gt(k, v.str), nil
	case "gte":
		return Gte(k, v.str), nil
	case "lt":
		return Lt(k, v.str), nil
	}
	return Lte(k, v.str), nil
}

// fromBounds reads the bounds of range's key k: an object of gt or gte,
// lt or lte, at least one.
func fromBounds(k string, n node, w *where) (Filter, error) {
	if n.kind != kindObject {
		return Filter{}, w.errorf(`want an object of bounds {"gte": "value", "lt": "value"}, got %s`, n.kind)
	}
	var bounds uint8
	var lo, hi string
	for i, name := range n.keys {
		v := n.vals[i]
		var flags uint8
		switch name {
		case "gt":
			flags = hasLo
		case "gte":
			flags = hasLo | loIncl
		case "lt":
			flags = hasHi
		case "lte":
			flags = hasHi | hiIncl
		}
		w.push(stepKey, name, 0)
		var msg string
		switch {
		case flags == 0:
			msg = fmt.Sprintf("unknown bound %s (want gt, gte, lt or lte)", clip.Quote(name))
		case !v.scalar():
			msg = "want a string, got " + v.kind.String()
		case bounds&flags&(hasLo|hasHi) != 0:
			msg = "a second " + map[bool]string{true: "lower", false: "upper"}[flags&hasLo != 0] + " bound"
		}
		if msg != "" {
			defer w.pop()
			return Filter{}, w.errorf("%s", msg)
		}
		w.pop()
		bounds |= flags
		if flags&hasLo != 0 {
			lo = v.str
		} else {
			hi = v.str
		}
	}
	if bounds == 0 {
		return Filter{}, w.errorf("range with no bound")
	}
	return rangeOf(k, bounds, lo, hi), nil
}

// fromList reads the operand of and, or: an array of filters.
func fromList(op string, n node, w *where) (Filter, error) {
	if n.kind != kindArray {
		return Filter{}, w.errorf("want an array of filters, got %s", n.kind)
	}
	if op == "or" && len(n.vals) == 0 {
		return Filter{}, w.errorf("or with no filters")
	}
	fs := make([]Filter, len(n.vals))
	for i, v := range n.vals {
		w.push(stepIndex, "", i)
		f, err := fromNode(v, w)
		w.pop()
		if err != nil {
			return Filter{}, err
		}
		fs[i] = f
	}
	if op == "and" {
		return And(fs...), nil
	}
	return Or(fs...), nil
}
