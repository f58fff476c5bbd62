package tokenizer

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/anna-search/anna/internal/clip"
)

// What the native implementation (the Rust tokenizers crate 0.20.4 through
// daulet/tokenizers) must not be given. Its C functions cannot unwind, so
// a panic on the Rust side aborts the whole process; a few inputs that it
// should refuse with an error panic instead (found by FuzzLoad):
//
//   - JSON that serde_json refuses inside a value the crate parses with
//     expect (the decoder's "Helper"): bytes that are not UTF-8, a \u
//     escape of a lone surrogate, a number beyond float64's range;
//   - a Precompiled normalizer whose charsmap is not base64 or not a
//     well-formed double array ("Precompiled"), or whose trie points past
//     its arrays (an index panic on the first text encoded).
//
// nativeSafe checks and mends top (the file's top-level fields) for the
// native side: the decoder, decoded and encoded again by Go when it holds
// a byte that is not UTF-8 or a surrogate escape (any invalid byte or lone
// surrogate then reads U+FFFD; numbers are written as they were), its
// numbers checked; a normalizer that names Precompiled, checked. Those are
// the only places the crate parses with expect; elsewhere serde_json's
// errors come back as errors. It reports whether it changed top, and an
// error naming the field that the native side would have crashed on.
func nativeSafe(top map[string]json.RawMessage) (changed bool, err error) {
	if raw := top["decoder"]; len(raw) > 0 {
		v, err := decodeNumbers(raw)
		if err != nil {
			return false, fieldError(`"decoder"`, err)
		}
		if err := checkNative(v); err != nil {
			return false, fieldError(`"decoder"`, err)
		}
		if !utf8.Valid(raw) || hasSurrogateEscape(raw) {
			js, err := encodeJSON(v)
			if err != nil {
				return false, fieldError(`"decoder"`, err)
			}
			top["decoder"] = js
			changed = true
		}
	}
	if raw := top["normalizer"]; bytes.Contains(raw, []byte("Precompiled")) {
		v, err := decodeNumbers(raw)
		if err == nil {
			err = checkNative(v)
		}
		if err != nil {
			return false, fieldError(`"normalizer"`, err)
		}
	}
	return changed, nil
}

func decodeNumbers(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// hasSurrogateEscape reports whether raw holds a \u escape of a UTF-16
// surrogate (D800-DFFF), paired or not (or what only looks like one, after
// an escaped backslash: then it is decoded and encoded again for nothing).
func hasSurrogateEscape(raw []byte) bool {
	for i := bytes.Index(raw, []byte(`\u`)); i >= 0 && i+3 < len(raw); {
		if c, d := raw[i+2]|0x20, raw[i+3]|0x20; c == 'd' && (d >= '8' && d <= '9' || d >= 'a' && d <= 'f') {
			return true
		}
		j := bytes.Index(raw[i+2:], []byte(`\u`))
		if j < 0 {
			break
		}
		i += 2 + j
	}
	return false
}

// checkNative walks v (decoded with UseNumber) for what nativeInput's
// comment lists; the error names the path to the field, built only on
// the way out of a failure (no string per level: a deep document costs
// linear time).
func checkNative(v any) error {
	switch x := v.(type) {
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err != nil {
			return fmt.Errorf("number %.40s out of range", x)
		}
	case []any:
		for i, e := range x {
			if err := checkNative(e); err != nil {
				return fieldError(strconv.Itoa(i), err)
			}
		}
	case map[string]any:
		if x["type"] == "Precompiled" {
			if err := checkPrecompiled(x); err != nil {
				return err
			}
		}
		for k, e := range x {
			if err := checkNative(e); err != nil {
				return fieldError(clip.Quote(k), err)
			}
		}
	}
	return nil
}

// pathError is an error at a field of the document: Path from the top.
type pathError struct {
	path []string // innermost first
	err  error
}

func (e *pathError) Error() string {
	p := make([]string, len(e.path))
	for i, s := range e.path {
		p[len(p)-1-i] = s
	}
	if len(p) > 8 { // a deep document: its outer and inner levels
		p = append(append(p[:4:4], fmt.Sprintf("…%d levels…", len(p)-8)), p[len(p)-4:]...)
	}
	return fmt.Sprintf("[%s]: %v", strings.Join(p, "]["), e.err)
}

func (e *pathError) Unwrap() error { return e.err }

func fieldError(key string, err error) error {
	if pe, ok := errors.AsType[*pathError](err); ok {
		pe.path = append(pe.path, key)
		return pe
	}
	return &pathError{path: []string{key}, err: err}
}

// checkPrecompiled checks a Precompiled normalizer's charsmap as
// spm_precompiled 0.1.4 reads and uses it: standard base64 with padding
// (no line breaks, no stray bits); a little-endian uint32 byte size of
// the trie, then that many bytes of uint32 units (a multiple of 4 is not
// required: the rest of a unit is left to the strings), then the
// normalized strings, UTF-8. The trie is then walked as its
// common_prefix_search walks it, from every state any byte can reach:
// every unit it reads must lie in the array and every string index a
// leaf gives must fall on a character boundary of the strings.
func checkPrecompiled(n map[string]any) error {
	s, ok := n["precompiled_charsmap"].(string)
	if !ok {
		return errors.New("Precompiled normalizer without a precompiled_charsmap string")
	}
	if strings.ContainsAny(s, "\r\n") {
		return errors.New("Precompiled normalizer: precompiled_charsmap holds a line break")
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return fmt.Errorf("Precompiled normalizer: precompiled_charsmap: %w", err)
	}
	if len(b) < 4 {
		return errors.New("Precompiled normalizer: precompiled_charsmap shorter than its header")
	}
	units := int(binary.LittleEndian.Uint32(b) / 4)
	if units > (len(b)-4)/4 {
		return fmt.Errorf("Precompiled normalizer: precompiled_charsmap declares %d trie units, holds %d", units, (len(b)-4)/4)
	}
	arr := make([]uint32, units)
	for i := range arr {
		arr[i] = binary.LittleEndian.Uint32(b[4+4*i:])
	}
	norm := b[4+4*units:]
	if !utf8.Valid(norm) {
		return errors.New("Precompiled normalizer: precompiled_charsmap's strings are not UTF-8")
	}
	return checkTrie(arr, norm)
}

// checkTrie walks a darts double array (spm_precompiled's DoubleArray)
// from its root over every byte 1-255 at every reachable state.
func checkTrie(arr []uint32, norm []byte) error {
	if len(arr) == 0 {
		return errors.New("Precompiled normalizer: empty trie")
	}
	offset := func(u uint32) int { return int(u>>10) << ((u & (1 << 9)) >> 6) }
	label := func(u uint32) uint32 { return u & (1<<31 | 0xFF) }
	bad := func(what string, at int) error {
		return fmt.Errorf("Precompiled normalizer: trie %s (unit %d of %d)", what, at, len(arr))
	}
	seen := make([]bool, len(arr))
	start := offset(arr[0])
	if start >= len(arr)+256 { // a state past the array, every byte leads out of it
		return bad("root offset past the array", 0)
	}
	stack := []int{start}
	visitedOut := map[int]bool{}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for c := 1; c < 256; c++ {
			q := s ^ c
			if q >= len(arr) {
				return bad("reaches past the array", q)
			}
			u := arr[q]
			if label(u) != uint32(c) {
				continue
			}
			p := q ^ offset(u)
			if u>>8&1 == 1 {
				if p >= len(arr) {
					return bad("leaf past the array", p)
				}
				idx := int(arr[p] & (1<<31 - 1))
				if idx > len(norm) || (idx < len(norm) && !utf8.RuneStart(norm[idx])) {
					return bad(fmt.Sprintf("leaf points at byte %d of %d, not a character's start", idx, len(norm)), p)
				}
			}
			if p < len(arr) {
				if !seen[p] {
					seen[p] = true
					stack = append(stack, p)
				}
			} else if !visitedOut[p] {
				visitedOut[p] = true
				stack = append(stack, p)
			}
		}
	}
	return nil
}
