//go:build cgo && !annapure

package tokenizer

import (
	"bytes"
	"encoding/json"

	hf "github.com/daulet/tokenizers"
)

// newDefault is the native implementation where cgo is on (and the
// annapure tag is not set): the Rust tokenizers crate.
//
// A file with a NUL character in a string goes to the pure-Go
// implementation instead: the binding turns the Rust side's error message
// into a C string with unwrap, so an error that quotes such a string (an
// unknown "version", say) aborts the whole process. js is valid JSON
// re-encoded from the file, where a NUL can only be written \u0000. What
// else the crate would crash on is refused or mended first (nativeSafe).
func newDefault(js []byte, top map[string]json.RawMessage) (backend, error) {
	if bytes.Contains(js, []byte(`\u0000`)) {
		return newPure(top)
	}
	changed, err := nativeSafe(top)
	if err != nil {
		return nil, err
	}
	if changed {
		if js, err = encodeJSON(top); err != nil {
			return nil, err
		}
	}
	h, err := hf.FromBytes(js)
	if err != nil {
		return nil, err
	}
	return native{h}, nil
}

// native is daulet/tokenizers' Tokenizer; the Rust side encodes through a
// shared reference (it is Sync).
type native struct{ h *hf.Tokenizer }

func (n native) encode(text string, offsets bool) ([]int64, [][2]int) {
	// The binding returns nothing for an input that fails to encode,
	// which the Rust normalisers and models never do for valid UTF-8.
	var r hf.Encoding
	if offsets {
		r = n.h.EncodeWithOptions(text, false, hf.WithReturnOffsets())
	} else {
		r = n.h.EncodeWithOptions(text, false)
	}
	ids := make([]int64, len(r.IDs))
	for i, id := range r.IDs {
		ids[i] = int64(id)
	}
	var offs [][2]int
	if offsets {
		offs = make([][2]int, len(r.Offsets))
		for i, o := range r.Offsets {
			offs[i] = [2]int{int(o[0]), int(o[1])}
		}
	}
	return ids, offs
}

func (n native) decode(ids []int64, skipSpecial bool) string {
	u := make([]uint32, len(ids))
	for i, id := range ids {
		u[i] = uint32(id)
	}
	return n.h.Decode(u, skipSpecial)
}

func (n native) close() error { return n.h.Close() }

func (native) name() string { return "native" }
