//go:build !cgo || annapure

package tokenizer

import "encoding/json"

// newDefault is the pure-Go implementation where cgo is off or the annapure
// tag is set.
func newDefault(_ []byte, top map[string]json.RawMessage) (backend, error) {
	return newPure(top)
}
