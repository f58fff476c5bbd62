package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// cleanText makes a Go string safe to hand across the C boundary, which
// takes NUL-terminated UTF-8:
//
//   - Invalid UTF-8 is replaced by U+FFFD once per maximal invalid subpart,
//     the Unicode-recommended practice that Python's
//     bytes.decode("utf-8", errors="replace") and Rust's
//     String::from_utf8_lossy both follow. (Go's own range loop and
//     strings.ToValidUTF8 replace differently, so Go and Python would
//     disagree on e.g. "\xe2\x82".)
//   - NUL bytes are removed. A C string would end at the first one and lose
//     the rest of the text; Hugging Face's BERT normaliser (clean_text)
//     drops NUL anyway, so for BERT-style tokenizers this gives exactly
//     Hugging Face's ids. Removal happens after decoding, so a NUL inside a
//     broken sequence splits it as Python would.
func cleanText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c != 0 {
				b.WriteByte(c)
			}
			i++
			continue
		}
		n := validPrefix(s[i:])
		if n > 0 {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		b.WriteRune(utf8.RuneError)
		i += -n
	}
	return b.String()
}

// validPrefix looks at the multi-byte sequence starting s (s[0] >= 0x80).
// It returns its length when the sequence is well-formed, or minus the length
// of the maximal invalid subpart (at least 1) to be replaced by one U+FFFD.
func validPrefix(s string) int {
	c := s[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF) // allowed range of the second byte
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0 // no overlongs
	case c == 0xED:
		need, hi = 2, 0x9F // no surrogates
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90 // no overlongs
	case c == 0xF4:
		need, hi = 3, 0x8F // nothing above U+10FFFF
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default: // stray continuation byte, C0, C1, F5..FF
		return -1
	}
	for k := 1; k <= need; k++ {
		if k >= len(s) {
			return -k
		}
		b := s[k]
		if k > 1 {
			lo, hi = 0x80, 0xBF
		}
		if b < lo || b > hi {
			return -k
		}
	}
	return need + 1
}
