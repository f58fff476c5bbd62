package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
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
// is valid (Validate returns nil).
func Parse(data []byte) (Filter, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := readNode(dec, "$")
	if err != nil {
		return Filter{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Filter{}, &Error{"$", "data after the filter"}
	}
	if n.kind == kindNull {
		return Filter{}, nil
	}
	return fromNode(n, "$")
}

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

// readNode reads the next JSON value from dec; path is where it is, for
// errors.
func readNode(dec *json.Decoder, path string) (node, error) {
	tok, err := dec.Token()
	if err != nil {
		return node{}, syntaxError(dec, path, err)
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
		switch t {
		case '{':
			n := node{kind: kindObject}
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return node{}, syntaxError(dec, path, err)
				}
				k := kt.(string) // the decoder only yields strings as member names
				if seen[k] {
					return node{}, &Error{path, fmt.Sprintf("duplicate member %q", k)}
				}
				seen[k] = true
				v, err := readNode(dec, path+pathKey(k))
				if err != nil {
					return node{}, err
				}
				n.keys = append(n.keys, k)
				n.vals = append(n.vals, v)
			}
			if _, err := dec.Token(); err != nil { // '}'
				return node{}, syntaxError(dec, path, err)
			}
			return n, nil
		case '[':
			n := node{kind: kindArray}
			for i := 0; dec.More(); i++ {
				v, err := readNode(dec, path+"["+strconv.Itoa(i)+"]")
				if err != nil {
					return node{}, err
				}
				n.vals = append(n.vals, v)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return node{}, syntaxError(dec, path, err)
			}
			return n, nil
		}
	}
	return node{}, &Error{path, fmt.Sprintf("unexpected JSON token %v", tok)}
}

func syntaxError(dec *json.Decoder, path string, err error) error {
	if errors.Is(err, io.EOF) {
		return &Error{path, "unexpected end of JSON"}
	}
	return &Error{path, fmt.Sprintf("invalid JSON at byte %d: %v", dec.InputOffset(), err)}
}

// fromNode turns an object node at path into a Filter: the And of its
// members, each an operator or shorthand key: value.
func fromNode(n node, path string) (Filter, error) {
	if n.kind != kindObject {
		return Filter{}, &Error{path, "want a filter object, got " + n.kind.String()}
	}
	var fs []Filter
	for i, k := range n.keys {
		v, at := n.vals[i], path+pathKey(k)
		var (
			f   Filter
			err error
		)
		switch k {
		case "eq", "prefix", "in":
			f, err = fromLeaves(k, v, at)
		case "gt", "gte", "lt", "lte", "range":
			if v.kind != kindObject { // a shorthand key older than the operator
				f, err = shorthand(k, v, at)
				break
			}
			f, err = fromLeaves(k, v, at)
		case "and", "or":
			f, err = fromList(k, v, at)
		case "not":
			f, err = fromNode(v, at)
			f = Not(f)
		default:
			f, err = shorthand(k, v, at)
		}
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
func shorthand(k string, v node, at string) (Filter, error) {
	if msg := checkKey(k); msg != "" {
		return Filter{}, &Error{at, msg}
	}
	if !v.scalar() {
		return Filter{}, &Error{at, fmt.Sprintf(`want a string (shorthand for {"eq": {%q: "..."}}), got %s`, k, v.kind)}
	}
	return Eq(k, v.str), nil
}

// scalar reports whether n is a value a filter compares with: a string, or
// a number or boolean, read as the text it is written as.
func (n node) scalar() bool { return n.kind == kindString || n.kind == kindOther }

// fromLeaves reads the operand of eq, prefix, in, gt, gte, lt, lte or
// range: an object of key: value (in: key: [values]; range: key: {bounds})
// members, the And of them when several.
func fromLeaves(op string, n node, path string) (Filter, error) {
	if n.kind != kindObject {
		want := `{"key": "value"}`
		if op == "in" {
			want = `{"key": ["value", ...]}`
		}
		return Filter{}, &Error{path, fmt.Sprintf("want an object %s, got %s", want, n.kind)}
	}
	if len(n.keys) == 0 {
		return Filter{}, &Error{path, op + " with no key"}
	}
	var fs []Filter
	for i, k := range n.keys {
		v, at := n.vals[i], path+pathKey(k)
		if msg := checkKey(k); msg != "" {
			return Filter{}, &Error{at, msg}
		}
		switch op {
		case "in":
			if v.kind != kindArray {
				return Filter{}, &Error{at, "want an array of strings, got " + v.kind.String()}
			}
			if len(v.vals) == 0 {
				return Filter{}, &Error{at, "in with no values"}
			}
			vals := make([]string, len(v.vals))
			for j, e := range v.vals {
				if !e.scalar() {
					return Filter{}, &Error{at + "[" + strconv.Itoa(j) + "]", "want a string, got " + e.kind.String()}
				}
				vals[j] = e.str
			}
			fs = append(fs, In(k, vals...))
		case "range":
			f, err := fromBounds(k, v, at)
			if err != nil {
				return Filter{}, err
			}
			fs = append(fs, f)
		default:
			if !v.scalar() {
				return Filter{}, &Error{at, "want a string, got " + v.kind.String()}
			}
			switch op {
			case "eq":
				fs = append(fs, Eq(k, v.str))
			case "prefix":
				fs = append(fs, Prefix(k, v.str))
			case "gt":
				fs = append(fs, Gt(k, v.str))
			case "gte":
				fs = append(fs, Gte(k, v.str))
			case "lt":
				fs = append(fs, Lt(k, v.str))
			case "lte":
				fs = append(fs, Lte(k, v.str))
			}
		}
	}
	if len(fs) == 1 {
		return fs[0], nil
	}
	return And(fs...), nil
}

// fromBounds reads the bounds of range's key k: an object of gt or gte,
// lt or lte, at least one.
func fromBounds(k string, n node, path string) (Filter, error) {
	if n.kind != kindObject {
		return Filter{}, &Error{path, `want an object of bounds {"gte": "value", "lt": "value"}, got ` + n.kind.String()}
	}
	var bounds uint8
	var lo, hi string
	for i, name := range n.keys {
		v, at := n.vals[i], path+pathKey(name)
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
		default:
			return Filter{}, &Error{at, fmt.Sprintf("unknown bound %q (want gt, gte, lt or lte)", name)}
		}
		if !v.scalar() {
			return Filter{}, &Error{at, "want a string, got " + v.kind.String()}
		}
		if bounds&flags&(hasLo|hasHi) != 0 {
			return Filter{}, &Error{at, "a second " + map[bool]string{true: "lower", false: "upper"}[flags&hasLo != 0] + " bound"}
		}
		bounds |= flags
		if flags&hasLo != 0 {
			lo = v.str
		} else {
			hi = v.str
		}
	}
	if bounds == 0 {
		return Filter{}, &Error{path, "range with no bound"}
	}
	return rangeOf(k, bounds, lo, hi), nil
}

// fromList reads the operand of and, or: an array of filters.
func fromList(op string, n node, path string) (Filter, error) {
	if n.kind != kindArray {
		return Filter{}, &Error{path, "want an array of filters, got " + n.kind.String()}
	}
	if op == "or" && len(n.vals) == 0 {
		return Filter{}, &Error{path, "or with no filters"}
	}
	fs := make([]Filter, len(n.vals))
	for i, v := range n.vals {
		f, err := fromNode(v, path+"["+strconv.Itoa(i)+"]")
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
