package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// Reading only the head of a long text. A truncating encode (Encode,
// EncodePair, EncodePrompt with a limit) keeps a text's first tokens, so
// it needs only as much of the text as gives them: tokenizing a 15 MB
// text to keep its first 256 tokens took the Rust tokenizer 15 to 45
// seconds (about a microsecond a byte, three for punctuation). headIDs
// tokenizes a prefix instead, doubled until it gives enough tokens.
//
// The prefix is cut at ASCII white space, with the white space before the
// cut dropped: a pre-tokenizer splits there (BERT's, GPT-2's byte-level
// regex, SentencePiece's metaspace), so every piece of the prefix is a
// piece of the whole text and the prefix's tokens are the text's first
// tokens. A prefix with no white space in its second half is cut at a rune
// boundary: only its last piece (a word, a run of digits or punctuation)
// can differ from the whole text's, and headMargin tokens past the limit
// keep that piece out of what is kept (WordPiece reads a word of more than
// 100 characters as one [UNK]).
//
// One rule is not exact: a text whose first headBytesPerToken bytes per
// token wanted (64 × (limit + headMargin)) give fewer tokens than that —
// a base64 blob, a word of 20,000 letters — is read as that prefix alone,
// so that its cost is bounded too.
const (
	headMargin        = 128
	headBytesPerToken = 64
)

// headIDs returns the raw token ids (no special tokens) of text, or of a
// prefix of it whose ids begin with text's first n ids (see above); n <= 0
// reads the whole text. whole says whether they are the whole text's.
func (t *Tokenizer) headIDs(text string, n int) (ids []int64, whole bool) {
	if n <= 0 {
		return t.raw(text), true
	}
	want := n + headMargin
	for size := max(4096, 8*want); size < len(text); size *= 2 {
		limit := headBytesPerToken * want
		last := size >= limit
		if last {
			size = limit
		}
		ids := t.raw(text[:cutHead(text, size)])
		if len(ids) >= want || last {
			return ids, false
		}
	}
	return t.raw(text), true
}

// pairIDs returns the raw ids of a pair that longest-first truncation to
// maxLen keeps exactly as it keeps the whole texts' (maxLen <= 0: the whole
// texts). Truncation gives the odd token of a halved budget to the longer
// text, so that one must be known: the shorter text (in bytes) is read
// whole and the longer by its head, which is enough when the head is the
// longer; otherwise both are read whole (two long texts).
func (t *Tokenizer) pairIDs(a, b string, maxLen int) ([]int64, []int64) {
	if maxLen <= 0 {
		return t.raw(a), t.raw(b)
	}
	swap := len(a) > len(b)
	if swap {
		a, b = b, a
	}
	ia := t.raw(a)
	ib, whole := t.headIDs(b, maxLen)
	if !whole && len(ia) >= len(ib) {
		ib = t.raw(b)
	}
	if swap {
		return ib, ia
	}
	return ia, ib
}

// cutHead returns where a prefix of text of about size bytes (size <
// len(text)) ends: after the last word before ASCII white space in its
// second half, else at the rune boundary at or before size.
func cutHead(text string, size int) int {
	if i := strings.LastIndexAny(text[:size], " \t\n\r"); i > size/2 {
		if j := strings.TrimRight(text[:i], " \t\n\r"); len(j) > size/2 {
			return len(j)
		}
	}
	for size > 0 && !utf8.RuneStart(text[size]) {
		size--
	}
	return size
}
