// Package tokenizer turns text into the model inputs of BERT-family encoders
// (input ids, token type ids, attention masks), matching Hugging Face
// tokenizers exactly.
//
// Two implementations read the same tokenizer.json, chosen at build time:
//
//   - native (the default where cgo is on): github.com/daulet/tokenizers,
//     the Rust tokenizers crate through cgo (libtokenizers.a), in files
//     built with `cgo && !annapure`;
//   - pure Go (pure*.go, always compiled): what `CGO_ENABLED=0 go build`
//     gets, and what `-tags annapure` selects with cgo on. LoadPure uses it
//     in any build. It covers the subset anna's models use: added tokens
//     (single_word, lstrip, rstrip, normalized), the BertNormalizer,
//     Sequence, Prepend, Replace (string patterns), Lowercase,
//     StripAccents, NFC/NFD/NFKC/NFKD and Strip normalisers; the
//     BertPreTokenizer, WhitespaceSplit, ByteLevel (GPT-2's regex, written
//     out by hand since Go's regexp has no look-ahead), Digits and Sequence
//     pre-tokenisers; WordPiece and BPE (byte fallback, fuse_unk,
//     ignore_merges) models; the ByteLevel, ByteFallback, Fuse, Replace,
//     Strip, WordPiece and Sequence decoders. Load fails with an error
//     naming the component for anything else (regex Split patterns other
//     than GPT-2's, Metaspace, Unigram, ...).
//
// Either way the vocabulary side runs without special tokens and with the
// file's truncation and padding stripped (daulet/tokenizers v1.22.1
// encodes single texts only and would apply them), and this package does
// the rest in Go: longest-first truncation and the post-processor template
// (special tokens, type ids), for single texts and pairs, and padding of
// batches.
//
// Text handling (see cleanText): invalid UTF-8 becomes U+FFFD exactly as
// Python's errors="replace" decodes it, and NUL bytes are removed (the C
// boundary of the native implementation cannot take them; the pure one
// does the same so that both give the same ids). Empty or whitespace-only
// input gives just the special tokens.
//
// Crash behaviour: the native implementation's C functions cannot unwind,
// so a panic on the Rust side would abort the process. A tokenizer.json
// the crate is known to panic on (native_check.go: a NUL in a string, a
// decoder with bytes that are not UTF-8, a lone surrogate or an
// out-of-range number, a malformed Precompiled charsmap) is refused with
// an error naming the file and the field, mended, or read by the pure-Go
// implementation before the Rust side sees it. Load errors always name the
// file; no input makes Load or an encoding panic (FuzzLoad, FuzzEncode).
package tokenizer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/anna-search/anna/internal/parallel"
	"github.com/anna-search/anna/internal/safe"
)

// Encoding is one tokenised input with special tokens. Mask is all 1 until
// Pad adds padding.
type Encoding struct {
	IDs, TypeIDs, Mask []int64
}

// Tokenizer encodes texts and text pairs. It is safe for concurrent use:
// the Rust tokenizer encodes through a shared reference (it is Sync), the
// pure one is immutable after Load, and a read lock keeps Close from
// freeing either under a running Encode.
type Tokenizer struct {
	path  string
	post  *template
	padID int64

	mu sync.RWMutex
	be backend // nil after Close
}

// backend is one implementation of the vocabulary side: native.go's
// (daulet/tokenizers) or pure.go's.
type backend interface {
	// encode returns text's ids without special tokens or truncation
	// and, when offsets is set, each id's byte range in text.
	encode(text string, offsets bool) ([]int64, [][2]int)
	decode(ids []int64, skipSpecial bool) string
	close() error
	name() string
}

// Load reads a Hugging Face tokenizer.json with the build's default
// implementation (see the package doc).
func Load(path string) (*Tokenizer, error) { return load(path, false) }

// LoadPure reads a Hugging Face tokenizer.json with the pure-Go
// implementation, whatever the build.
func LoadPure(path string) (*Tokenizer, error) { return load(path, true) }

// Implementation names the implementation t encodes with: "native" or
// "pure".
func (t *Tokenizer) Implementation() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.be == nil {
		return "closed"
	}
	return t.be.name()
}

func load(path string, pureOnly bool) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: read %s: %w", path, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("tokenizer: parse %s: %s: %w", path, jsonPosition(data, err), err)
	}
	if len(top["model"]) == 0 || string(top["model"]) == "null" {
		return nil, fmt.Errorf("tokenizer: parse %s: no \"model\" field; is this a Hugging Face tokenizer.json?", path)
	}
	post, err := parsePostProcessor(top["post_processor"])
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	padID, err := findPadID(top)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}

	// The file's truncation and padding (MiniLM ships max 128 and fixed
	// padding to 128) would be applied by the Rust side to the bare
	// sequences; this package does both itself.
	top["truncation"] = json.RawMessage("null")
	top["padding"] = json.RawMessage("null")
	js, err := encodeJSON(top)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: re-encode %s: %w", path, err)
	}
	var be backend
	if pureOnly {
		be, err = newPure(top)
	} else {
		be, err = newDefault(js, top)
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: load %s: %w", path, err)
	}
	return &Tokenizer{path: path, post: post, padID: padID, be: be}, nil
}

// encodeJSON is v as JSON, HTML characters left as they are.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}

// jsonPosition turns a JSON decoding error's byte offset into "line L col C".
func jsonPosition(data []byte, err error) string {
	var off int64
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	default:
		return "invalid JSON"
	}
	off = min(off, int64(len(data)))
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	col := off - int64(bytes.LastIndexByte(data[:off], '\n'))
	return fmt.Sprintf("line %d col %d", line, col)
}

// findPadID takes the pad id from the file's padding settings, else from a
// [PAD] or <pad> added token, else 0.
func findPadID(top map[string]json.RawMessage) (int64, error) {
	if p := top["padding"]; len(p) > 0 && string(p) != "null" {
		var v struct {
			PadID *int64 `json:"pad_id"`
		}
		if err := json.Unmarshal(p, &v); err != nil {
			return 0, fmt.Errorf("padding: %w", err)
		}
		if v.PadID != nil {
			return *v.PadID, nil
		}
	}
	var added []struct {
		ID      int64  `json:"id"`
		Content string `json:"content"`
	}
	if a := top["added_tokens"]; len(a) > 0 && string(a) != "null" {
		if err := json.Unmarshal(a, &added); err != nil {
			return 0, fmt.Errorf("added_tokens: %w", err)
		}
	}
	for _, name := range []string{"[PAD]", "<pad>"} {
		for _, t := range added {
			if t.Content == name {
				return t.ID, nil
			}
		}
	}
	return 0, nil
}

// PadID is the id Pad should fill with for this tokenizer.
func (t *Tokenizer) PadID() int64 { return t.padID }

// Close frees the Rust tokenizer (or drops the pure one). Encoding after
// Close panics: it is a programming error, like using a closed channel.
// Closing a nil *Tokenizer does nothing.
func (t *Tokenizer) Close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.be != nil {
		err := t.be.close()
		t.be = nil
		return err
	}
	return nil
}

// raw returns text's token ids without special tokens or truncation.
func (t *Tokenizer) raw(text string) []int64 {
	text = cleanText(text)
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.be == nil {
		panic("tokenizer: encode after Close of " + t.path)
	}
	if text == "" {
		return nil
	}
	ids, _ := t.be.encode(text, false)
	return ids
}

// Decode turns token ids back into text with the file's decoder (byte-level
// BPE, SentencePiece's ▁ and byte fallback), special tokens skipped when
// skipSpecial is set: what a generating decoder's new tokens say.
func (t *Tokenizer) Decode(ids []int64, skipSpecial bool) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.be == nil {
		panic("tokenizer: decode after Close of " + t.path)
	}
	return t.be.decode(ids, skipSpecial)
}

// IDs tokenises text without special tokens or truncation.
func (t *Tokenizer) IDs(text string) []int64 { return t.raw(text) }

// Clean is text as the tokenizer reads it: invalid UTF-8 replaced by
// U+FFFD (as Python's errors='replace' does), NUL bytes dropped (the Rust
// tokenizer's C boundary cannot take them; the pure one drops them too).
func Clean(text string) string { return cleanText(text) }

// Encode tokenises text with special tokens, truncated from the right so the
// total length is at most maxLen (maxLen <= 0: no limit). With a limit it
// reads only as much of a long text as gives the tokens kept (head.go:
// exact, except that a text of more than 64 bytes a token is read by its
// first 64 bytes per token kept), so its cost does not grow with the text. A maxLen smaller
// than the special tokens keeps only the special tokens (Hugging Face would
// not truncate at all there: an unsigned underflow).
func (t *Tokenizer) Encode(text string, maxLen int) Encoding {
	ids, _ := t.headIDs(text, maxLen)
	return t.post.apply(ids, nil, false, maxLen)
}

// EncodePair tokenises a text pair ([CLS] a [SEP] b [SEP] for BERT, type
// ids 0 for a, 1 for b), truncated longest-first like Hugging Face so the
// total is at most maxLen (maxLen <= 0: no limit).
func (t *Tokenizer) EncodePair(a, b string, maxLen int) Encoding {
	ia, ib := t.pairIDs(a, b, maxLen)
	return t.post.apply(ia, ib, true, maxLen)
}

// EncodePrompt lays out prefix, text's ids and suffix as one sequence with
// no other special token (a decoder reranker's prompt, model.PairPrompt):
// text is cut from the right so the total is at most maxLen (maxLen <= 0:
// no limit); prefix and suffix are always whole.
func (t *Tokenizer) EncodePrompt(prefix []int64, text string, suffix []int64, maxLen int) Encoding {
	ids, _ := t.headIDs(text, maxLen)
	if maxLen > 0 {
		ids = ids[:min(len(ids), max(maxLen-len(prefix)-len(suffix), 0))]
	}
	n := len(prefix) + len(ids) + len(suffix)
	e := Encoding{IDs: make([]int64, 0, n), TypeIDs: make([]int64, n), Mask: make([]int64, n)}
	e.IDs = append(append(append(e.IDs, prefix...), ids...), suffix...)
	for i := range e.Mask {
		e.Mask[i] = 1
	}
	return e
}

// EncodeBatch is Encode over texts, spread over GOMAXPROCS goroutines.
func (t *Tokenizer) EncodeBatch(texts []string, maxLen int) []Encoding {
	out := make([]Encoding, len(texts))
	workers := min(runtime.GOMAXPROCS(0), len(texts)/4+1)
	// Encode cannot fail and nothing here is cancelled, so Each's error is
	// nil unless an Encode panicked: that panic is raised again here, on
	// the caller's goroutine (where it can be recovered, as when Encode
	// runs inline), not dropped with the texts it left unencoded.
	safe.Repanic(parallel.Each(context.Background(), len(texts), workers, func(i int) error {
		out[i] = t.Encode(texts[i], maxLen)
		return nil
	}))
	return out
}

// Pad right-pads encodings to the longest one and flattens them row-major
// into [len(encs)*seqLen] slices, the layout ONNX Runtime takes for
// [batch, seqLen] tensors. Padding has id padID, type id 0 and mask 0.
func Pad(encs []Encoding, padID int64) (ids, typeIDs, mask []int64, seqLen int) {
	for _, e := range encs {
		seqLen = max(seqLen, len(e.IDs))
	}
	n := len(encs) * seqLen
	ids, typeIDs, mask = make([]int64, n), make([]int64, n), make([]int64, n)
	for r, e := range encs {
		row := r * seqLen
		copy(ids[row:], e.IDs)
		copy(typeIDs[row:], e.TypeIDs)
		copy(mask[row:], e.Mask)
		for j := row + len(e.IDs); j < row+seqLen; j++ {
			ids[j] = padID
		}
	}
	return ids, typeIDs, mask, seqLen
}
