package filter

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Kind is what a Value holds.
type Kind uint8

const (
	KindString Kind = iota // one string
	KindNumber             // one number (float64)
	KindList               // several values, strings and numbers: a multi-valued key
)

func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindNumber:
		return "number"
	case KindList:
		return "list"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is one metadata value beyond a plain string: a number, or a list
// of strings and numbers (a multi-valued key, such as tags). Documents keep
// their plain strings in Meta map[string]string and these in MetaValues
// map[string]Value (engine.Document, storage.Doc, beir.Doc); a filter
// reads a key's values from both.
//
// A list matches a filter when any of its elements does: In a document
// with tags ["a", "b"], Eq("tags", "a") and Eq("tags", "b") both match, and
// Not(Eq("tags", "a")) does not. A number compares as a number: Eq and In
// match it when their value reads as a number equal to it ("1960",
// "1960.0" and "1.96e3" all match 1960), and range bounds compare with it
// numerically (see Gte). Numbers are float64: integers are exact up to
// 2^53.
//
// The zero Value is the empty string. Values are immutable (the
// constructors copy) and compare with Equal. A number that is NaN or
// infinite is invalid (Validate); JSON cannot write one.
type Value struct {
	kind Kind
	s    string
	n    float64
	list []Value // KindList: strings and numbers only
}

// StringValue returns the string s as a Value.
func StringValue(s string) Value { return Value{s: s} }

// NumberValue returns the number x as a Value (-0 becomes 0).
func NumberValue(x float64) Value {
	if x == 0 {
		x = 0 // -0 and 0 are the same number in every filter
	}
	return Value{kind: KindNumber, n: x}
}

// ListValue returns a list of the values vs, in order; elements that are
// lists themselves are spliced in (lists do not nest). A list may be empty
// (the key is present with no value: no Eq, In, Prefix or range on it
// matches).
func ListValue(vs ...Value) Value {
	out := make([]Value, 0, len(vs))
	for _, v := range vs {
		if v.kind == KindList {
			out = append(out, v.list...)
		} else {
			out = append(out, v)
		}
	}
	return Value{kind: KindList, list: out}
}

// StringsValue returns a list of the strings ss.
func StringsValue(ss ...string) Value {
	out := make([]Value, len(ss))
	for i, s := range ss {
		out[i] = StringValue(s)
	}
	return Value{kind: KindList, list: out}
}

// Kind says what v holds.
func (v Value) Kind() Kind { return v.kind }

// Number returns v's number and true when v is a number.
func (v Value) Number() (float64, bool) { return v.n, v.kind == KindNumber }

// Str returns v's string and true when v is a string.
func (v Value) Str() (string, bool) { return v.s, v.kind == KindString }

// List returns a copy of v's elements when v is a list, nil otherwise.
func (v Value) List() []Value {
	if v.kind != KindList {
		return nil
	}
	return slices.Clone(v.list)
}

// Values returns what filters compare: v's elements when v is a list,
// else v alone.
func (v Value) Values() []Value {
	if v.kind == KindList {
		return slices.Clone(v.list)
	}
	return []Value{v}
}

// Equal reports whether v and w are the same value: same kind, equal
// strings, equal numbers, lists equal element by element in order.
func (v Value) Equal(w Value) bool {
	if v.kind != w.kind {
		return false
	}
	switch v.kind {
	case KindString:
		return v.s == w.s
	case KindNumber:
		return v.n == w.n
	}
	return slices.EqualFunc(v.list, w.list, Value.Equal)
}

// Validate returns an error when v holds a NaN or infinite number.
func (v Value) Validate() error {
	for _, e := range v.Values() {
		if e.kind == KindNumber && (math.IsNaN(e.n) || math.IsInf(e.n, 0)) {
			return fmt.Errorf("number %v is not finite", e.n)
		}
	}
	return nil
}

// String returns v as text: a string as it is, a number as JSON writes it
// (1960, 0.5, 1e+21), a list as JSON.
func (v Value) String() string {
	switch v.kind {
	case KindString:
		return v.s
	case KindNumber:
		return string(appendNumber(nil, v.n))
	}
	b, _ := v.MarshalJSON()
	return string(b)
}

// MarshalJSON writes a string, a number or an array of them. It fails only
// on a NaN or infinite number.
func (v Value) MarshalJSON() ([]byte, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	return v.appendJSON(nil), nil
}

func (v Value) appendJSON(b []byte) []byte {
	switch v.kind {
	case KindString:
		return appendString(b, v.s)
	case KindNumber:
		return appendNumber(b, v.n)
	}
	b = append(b, '[')
	for i, e := range v.list {
		if i > 0 {
			b = append(b, ',')
		}
		b = e.appendJSON(b)
	}
	return append(b, ']')
}

// appendNumber writes x as encoding/json does.
func appendNumber(b []byte, x float64) []byte {
	j, err := json.Marshal(x)
	if err != nil { // NaN or Inf: not JSON
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	}
	return append(b, j...)
}

// UnmarshalJSON reads a value by ValueFromJSON's rules; null is refused
// (a null member means no value: skip the key).
func (v *Value) UnmarshalJSON(data []byte) error {
	w, ok, err := ValueFromJSON(data)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("filter: a metadata value cannot be null")
	}
	*v = w
	return nil
}

// ValueFromJSON reads one JSON metadata value:
//
//	"text"            a string
//	1960, -2.5e3      a number (one beyond float64's range stays the string
//	                  it was written as)
//	true, false       the strings "true" and "false"
//	[...]             a list of its elements read by these rules; null
//	                  elements are dropped, and nested arrays and objects
//	                  become their compact JSON text as strings
//	{...}             its compact JSON text, as a string
//	null              no value: ok is false
//
// Invalid UTF-8 in strings becomes U+FFFD (encoding/json's rule). The
// error is for data that is not one JSON value.
func ValueFromJSON(data []byte) (v Value, ok bool, err error) {
	data = bytes.TrimSpace(data)
	if !json.Valid(data) {
		return Value{}, false, errors.New("not a JSON value")
	}
	if data[0] == '[' {
		var elems []json.RawMessage
		if err := json.Unmarshal(data, &elems); err != nil {
			return Value{}, false, err
		}
		list := make([]Value, 0, len(elems))
		for _, e := range elems {
			e = bytes.TrimSpace(e)
			if e[0] == '[' || e[0] == '{' {
				s, err := compactText(e)
				if err != nil {
					return Value{}, false, err
				}
				list = append(list, StringValue(s))
				continue
			}
			if ev, ok := scalarFromJSON(e); ok {
				list = append(list, ev)
			}
		}
		return Value{kind: KindList, list: list}, true, nil
	}
	if data[0] == '{' {
		s, err := compactText(data)
		return StringValue(s), err == nil, err
	}
	v, ok = scalarFromJSON(data)
	return v, ok, nil
}

// scalarFromJSON reads a valid JSON string, number, boolean or null (ok
// false).
func scalarFromJSON(data []byte) (Value, bool) {
	switch data[0] {
	case 'n':
		return Value{}, false
	case 't', 'f':
		return StringValue(string(data)), true
	case '"':
		var s string
		_ = json.Unmarshal(data, &s) // valid: checked by the caller
		return StringValue(s), true
	}
	x, err := strconv.ParseFloat(string(data), 64)
	if err != nil || math.IsInf(x, 0) {
		return StringValue(string(data)), true // out of float64's range: kept as written
	}
	return NumberValue(x), true
}

func compactText(data []byte) (string, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return "", err
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD"), nil
}

// ReadNumber reports whether s is a decimal number — an optional sign,
// digits with an optional fraction, an optional exponent: "1960", "-2.5",
// ".5", "1e3"; not " 1", "0x10", "Inf", "NaN" or "1_000" — and returns it
// when it is and is finite. Eq, In and range bounds whose value reads as a
// number compare with number values numerically.
func ReadNumber(s string) (float64, bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			exp++
		}
		if exp == 0 {
			return 0, false
		}
	}
	if i != len(s) {
		return 0, false
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(x, 0) {
		return 0, false
	}
	return x, true
}

// EncodeNumber returns the 8-byte key of x that indexes store number
// values under: byte order is numeric order (-0 and 0 are one key). x must
// not be NaN.
func EncodeNumber(x float64) string {
	if x == 0 {
		x = 0
	}
	u := math.Float64bits(x)
	if u>>63 == 1 {
		u = ^u
	} else {
		u |= 1 << 63
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], u)
	return string(b[:])
}

// DecodeNumber is the inverse of EncodeNumber; ok is false when k is not 8
// bytes.
func DecodeNumber(k string) (float64, bool) {
	if len(k) != 8 {
		return 0, false
	}
	u := binary.BigEndian.Uint64([]byte(k))
	if u>>63 == 1 {
		u &^= 1 << 63
	} else {
		u = ^u
	}
	return math.Float64frombits(u), true
}

// EachValue calls fn with every string and number of a document's
// metadata: each pair of meta, then each scalar of values (a list's
// elements one by one, repeats included), keys in no particular order.
// Indexes build their postings from it.
func EachValue(meta map[string]string, values map[string]Value, fn func(key string, v Value)) {
	for k, s := range meta {
		fn(k, StringValue(s))
	}
	for k, v := range values {
		if v.kind != KindList {
			fn(k, v)
			continue
		}
		for _, e := range v.list {
			fn(k, e)
		}
	}
}
