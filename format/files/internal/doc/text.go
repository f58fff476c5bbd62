package doc

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"
)

// sniffLen is how much of a file IsBinary and DecodeText look at to guess
// its encoding.
const sniffLen = 8 << 10

// IsBinary reports whether b (a file's first bytes or all of it) looks like
// binary data rather than text: a NUL byte where no UTF-16 text explains it.
func IsBinary(b []byte) bool {
	head := b[:min(len(b), sniffLen)]
	if bomEncoding(head) != nil {
		return false
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return utf16Order(head) == nil
	}
	// No NUL: binary when control characters other than white space are
	// more than 1 in 100 bytes (text in any 8-bit encoding has almost none).
	ctl := 0
	for _, c := range head {
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != '\v' && c != 0x1b {
			ctl++
		}
	}
	return ctl*100 > len(head)
}

// bomEncoding is the encoding a byte order mark at the start of b names.
func bomEncoding(b []byte) *namedEncoding {
	switch {
	case bytes.HasPrefix(b, []byte{0xFF, 0xFE}) && !bytes.HasPrefix(b, []byte{0xFF, 0xFE, 0, 0}):
		return &namedEncoding{unicode.UTF16(unicode.LittleEndian, unicode.ExpectBOM), "UTF-16LE with a byte order mark"}
	case bytes.HasPrefix(b, []byte{0xFE, 0xFF}):
		return &namedEncoding{unicode.UTF16(unicode.BigEndian, unicode.ExpectBOM), "UTF-16BE with a byte order mark"}
	}
	return nil
}

type namedEncoding struct {
	enc  encoding.Encoding
	name string
}

// utf16Order guesses UTF-16 without a byte order mark: text in a Latin
// script has a NUL in every other byte.
func utf16Order(b []byte) *namedEncoding {
	if len(b) < 4 {
		return nil
	}
	var even, odd int
	n := len(b) &^ 1
	for i := 0; i < n; i += 2 {
		if b[i] == 0 {
			even++
		}
		if b[i+1] == 0 {
			odd++
		}
	}
	half := n / 2
	switch {
	case odd*10 >= half*8 && even*10 < half:
		return &namedEncoding{unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM), "UTF-16LE (no byte order mark)"}
	case even*10 >= half*8 && odd*10 < half:
		return &namedEncoding{unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM), "UTF-16BE (no byte order mark)"}
	}
	return nil
}

// DecodeText turns a text file's bytes into UTF-8: UTF-8 as it is (less a
// byte order mark), UTF-16 with a byte order mark or recognisably without
// one, and anything else that is not valid UTF-8 as Windows-1252 (which
// reads Latin-1 text). note names the conversion ("" for UTF-8). Text
// that converts badly keeps U+FFFD where bytes made no sense.
func DecodeText(b []byte) (text, note string) {
	if bytes.HasPrefix(b, []byte("\xEF\xBB\xBF")) {
		b = b[3:]
		if utf8.Valid(b) {
			return string(b), ""
		}
	}
	ne := bomEncoding(b)
	if ne == nil && utf8.Valid(b) {
		return string(b), ""
	}
	if ne == nil {
		ne = utf16Order(b[:min(len(b), sniffLen)])
	}
	if ne == nil {
		ne = &namedEncoding{charmap.Windows1252, "Windows-1252 / Latin-1 (not UTF-8)"}
	}
	out, err := ne.enc.NewDecoder().Bytes(b)
	if err != nil {
		return strings.ToValidUTF8(string(b), "\uFFFD"), "invalid UTF-8, replaced by U+FFFD"
	}
	return strings.TrimPrefix(strings.ToValidUTF8(string(out), "\uFFFD"), "\uFEFF"), ne.name
}

// ligatures are the presentation forms PDFs and some fonts use for letter
// pairs, read as their letters.
var ligatures = strings.NewReplacer(
	"\uFB00", "ff", "\uFB01", "fi", "\uFB02", "fl", "\uFB03", "ffi", "\uFB04", "ffl", "\uFB05", "st", "\uFB06", "st",
	"\u00AD", "", // soft hyphen
	"\u00A0", " ", // no-break space
	"\u2002", " ", "\u2003", " ", "\u2009", " ", "\u200B", "",
	"\r\n", "\n", "\r", "\n",
)

// Normalize reads ligatures as letters, drops soft hyphens and zero-width
// spaces, makes no-break and typographic spaces plain, and line ends "\n".
func Normalize(s string) string { return ligatures.Replace(s) }

// Truncate cuts s to at most n bytes at a rune boundary; cut says whether it
// did.
func Truncate(s string, n int) (_ string, cut bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// Title cleans a title the format gives: one line, spaces collapsed, at
// most 300 bytes of valid UTF-8 (bytes that are not read as U+FFFD).
func Title(s string) string {
	s = strings.Join(strings.Fields(Normalize(strings.ToValidUTF8(s, "\uFFFD"))), " ")
	s, _ = Truncate(s, 300)
	return s
}
