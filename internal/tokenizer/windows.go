package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Window is a byte range [Start, End) of a text.
type Window struct{ Start, End int }

// Windows cuts text into windows of at most size tokens (special tokens
// not counted), the first starting at the first token and each next one
// stride tokens further, until a window reaches the last token — each
// start and end moved back to the nearest word boundary, so that no word
// is cut into its pieces (a window holds at least one token); it returns
// the text as the tokenizer reads it (see cleanText: equal to text unless
// it holds invalid UTF-8 or NUL bytes) and the windows' byte ranges in it,
// each from its first token's start to its last token's end. A text of at
// most size tokens is one window covering the whole text; an empty one
// gives none. size and stride below 1 are taken as 1, stride above size as
// size.
func (t *Tokenizer) Windows(text string, size, stride int) (string, []Window) {
	text = cleanText(text)
	size, stride = max(size, 1), min(max(stride, 1), max(size, 1))
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.be == nil {
		panic("tokenizer: encode after Close of " + t.path)
	}
	if text == "" {
		return text, nil
	}
	_, offs := t.be.encode(text, true)
	if len(offs) == 0 {
		return text, nil
	}
	if len(offs) <= size {
		return text, []Window{{0, len(text)}}
	}
	// Windows start and end between words, never inside one (a word cut
	// into word pieces would be read differently on its own): boundary(i)
	// says whether token i starts a word.
	boundary := func(i int) bool {
		if i <= 0 || i >= len(offs) {
			return true
		}
		at := int(offs[i][0])
		if at != int(offs[i-1][1]) {
			return true // white space between them
		}
		before, _ := utf8.DecodeLastRuneInString(text[:at])
		after, _ := utf8.DecodeRuneInString(text[at:])
		return !wordRune(before) || !wordRune(after)
	}
	var out []Window
	for start := 0; ; {
		end := min(start+size, len(offs))
		for end < len(offs) && end > start+1 && !boundary(end) {
			end--
		}
		out = append(out, Window{int(offs[start][0]), int(offs[end-1][1])})
		if end == len(offs) {
			return text, out
		}
		next := start + stride
		for next > start+1 && !boundary(next) {
			next--
		}
		start = max(next, start+1)
	}
}

func wordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

// Count is the number of tokens of text, special tokens not counted.
func (t *Tokenizer) Count(text string) int { return len(t.raw(text)) }
