package tokenizer

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var v struct {
		Type               string            `json:"type"`
		CleanText          *bool             `json:"clean_text"`
		HandleChineseChars *bool             `json:"handle_chinese_chars"`
		StripAccents       *bool             `json:"strip_accents"`
		Lowercase          *bool             `json:"lowercase"`
		Normalizers        []json.RawMessage `json:"normalizers"`
		Prepend            string            `json:"prepend"`
		Pattern            struct {
			String *string `json:"String"`
			Regex  *string `json:"Regex"`
		} `json:"pattern"`
		Content     string `json:"content"`
		StripLeft   bool   `json:"strip_left"`
		StripRight  bool   `json:"strip_right"`
		Left, Right *bool
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	on := func(b *bool, def bool) bool {
		if b == nil {
			return def
		}
		return *b
	}
	switch v.Type {
	case "BertNormalizer":
		lower := on(v.Lowercase, true)
		return bertNorm{
			clean:   on(v.CleanText, true),
			chinese: on(v.HandleChineseChars, true),
			strip:   on(v.StripAccents, lower), // null: as lowercase
			lower:   lower,
		}, nil
	case "Sequence":
		var seq seqNorm
		for i, r := range v.Normalizers {
			n, err := parseNormalizer(r)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		return seq, nil
	case "Prepend":
		return prependNorm(v.Prepend), nil
	case "Replace":
		if v.Pattern.String == nil || *v.Pattern.String == "" {
			return nil, fmt.Errorf("Replace: only a non-empty String pattern is supported by the pure-Go tokenizer")
		}
		return replaceNorm{*v.Pattern.String, v.Content}, nil
	case "Lowercase":
		return lowerNorm{}, nil
	case "StripAccents":
		return stripAccentsNorm{}, nil
	case "NFD":
		return decompNorm{norm.NFD}, nil
	case "NFKD":
		return decompNorm{norm.NFKD}, nil
	case "NFC", "NFKC":
		f := norm.NFC
		if v.Type == "NFKC" {
			f = norm.NFKC
		}
		return composeNorm{f}, nil
	case "Strip":
		return stripNorm{on(v.Left, v.StripLeft), on(v.Right, v.StripRight)}, nil
	}
	return nil, fmt.Errorf("type %q not supported by the pure-Go tokenizer (BertNormalizer, Sequence, Prepend, Replace, Lowercase, StripAccents, NFC, NFD, NFKC, NFKD, Strip)", v.Type)
}

type seqNorm []normalizer

func (s seqNorm) normalize(cs []nchar) []nchar {
	for _, n := range s {
		cs = n.normalize(cs)
	}
	return cs
}

// bertNorm is Hugging Face's BertNormalizer: clean_text drops NUL, U+FFFD
// and "other" characters (Cc, Cf, Co, Cs, Cn) except \t \n \r and maps
// white space to ' '; Chinese characters get spaces around them; accents are
// stripped (NFD, then no Mn) and characters lowercased.
type bertNorm struct{ clean, chinese, strip, lower bool }

func (b bertNorm) normalize(cs []nchar) []nchar {
	out := cs[:0:0]
	out = slices.Grow(out, len(cs))
	for _, c := range cs {
		if b.clean {
			if c.r == 0 || c.r == 0xFFFD || isBertControl(c.r) {
				continue
			}
			if isRustSpace(c.r) {
				c.r = ' '
			}
		}
		if b.chinese && isChineseChar(c.r) {
			out = append(out, nchar{' ', c.s, c.e}, c, nchar{' ', c.s, c.e})
			continue
		}
		out = append(out, c)
	}
	if b.strip {
		out = stripAccentsNorm{}.normalize(out)
	}
	if b.lower {
		out = lowerNorm{}.normalize(out)
	}
	return out
}

// isRustSpace is Rust's char::is_whitespace (the White_Space property).
func isRustSpace(r rune) bool { return unicode.IsSpace(r) }

func isBertControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	return isOther(r)
}

// isOther is general category C as tokenizers' unicode_categories crate
// sees it: Cc, Cf, Co, Cs. Unassigned code points (Cn: U+0380, U+FFFE)
// are kept, as the committed vectors show.
func isOther(r rune) bool {
	if r < 0x80 {
		return r < 0x20 || r == 0x7f
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

func isChineseChar(r rune) bool {
	switch {
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0x3400 && r <= 0x4DBF, r >= 0x20000 && r <= 0x2A6DF,
		r >= 0x2A700 && r <= 0x2B73F, r >= 0x2B740 && r <= 0x2B81F, r >= 0x2B920 && r <= 0x2CEAF,
		r >= 0xF900 && r <= 0xFAFF, r >= 0x2F800 && r <= 0x2FA1F:
		return true
	}
	return false
}

func isWordChar(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_' }

type lowerNorm struct{}

func (lowerNorm) normalize(cs []nchar) []nchar {
	var out []nchar
	for i, c := range cs {
		if c.r == 0x130 { // Rust: 'İ' lowercases to "i\u0307"
			if out == nil {
				out = append(make([]nchar, 0, len(cs)+1), cs[:i]...)
			}
			out = append(out, nchar{'i', c.s, c.e}, nchar{0x307, c.s, c.e})
			continue
		}
		if c.r >= 'A' && c.r <= 'Z' {
			c.r += 'a' - 'A'
		} else if c.r >= 0x80 {
			c.r = unicode.ToLower(c.r)
		}
		if out != nil {
			out = append(out, c)
		} else {
			cs[i] = c
		}
	}
	if out != nil {
		return out
	}
	return cs
}

// stripAccentsNorm is NFD followed by dropping nonspacing marks (Mn).
type stripAccentsNorm struct{}

func (stripAccentsNorm) normalize(cs []nchar) []nchar {
	cs = decompNorm{norm.NFD}.normalize(cs)
	out := cs[:0]
	for _, c := range cs {
		if c.r >= 0x300 && unicode.Is(unicode.Mn, c.r) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// decompNorm is NFD or NFKD: each character decomposed on its own (its
// parts keep its byte range), then combining marks put in canonical order,
// which is the whole text's decomposition.
type decompNorm struct{ f norm.Form }

func (d decompNorm) normalize(cs []nchar) []nchar {
	var out []nchar
	var buf [8]byte
	for i, c := range cs {
		if c.r < 0xC0 && (d.f == norm.NFD || c.r < 0xA0) {
			if out != nil {
				out = append(out, c)
			}
			continue
		}
		n := encodeRune(buf[:], c.r)
		if d.f.IsNormal(buf[:n]) && d.f.PropertiesString(string(buf[:n])).CCC() == 0 {
			if out != nil {
				out = append(out, c)
			}
			continue
		}
		if out == nil {
			out = append(make([]nchar, 0, len(cs)+8), cs[:i]...)
		}
		for _, r := range d.f.String(string(buf[:n])) {
			out = append(out, nchar{r, c.s, c.e})
		}
	}
	if out == nil {
		return cs
	}
	// Canonical ordering: a stable sort of each run of non-starters by
	// combining class.
	for i := 0; i < len(out); {
		if ccc(out[i].r) == 0 {
			i++
			continue
		}
		j := i
		for j < len(out) && ccc(out[j].r) != 0 {
			j++
		}
		if j-i > 1 {
			slices.SortStableFunc(out[i:j], func(a, b nchar) int { return int(ccc(a.r)) - int(ccc(b.r)) })
		}
		i = j
	}
	return out
}

func ccc(r rune) uint8 {
	if r < 0x300 {
		return 0
	}
	return norm.NFD.PropertiesString(string(r)).CCC()
}

func encodeRune(b []byte, r rune) int {
	s := string(r)
	return copy(b, s)
}

// composeNorm is NFC or NFKC. Text already in that form is kept with its
// offsets; otherwise each normalisation segment (a starter and what
// combines with it) becomes its composed characters, all with the
// segment's byte range.
type composeNorm struct{ f norm.Form }

func (c composeNorm) normalize(cs []nchar) []nchar {
	s := runesString(cs)
	if c.f.IsNormalString(s) {
		return cs
	}
	var out []nchar
	// Segments start at characters with combining class 0 whose
	// decomposition starts with a starter, which norm's boundary test tells.
	for i := 0; i < len(cs); {
		j := i + 1
		for j < len(cs) && !c.f.PropertiesString(string(cs[j].r)).BoundaryBefore() {
			j++
		}
		seg := runesString(cs[i:j])
		for _, r := range c.f.String(seg) {
			out = append(out, nchar{r, cs[i].s, cs[j-1].e})
		}
		i = j
	}
	return out
}

// prependNorm prepends its text to non-empty input; the new characters map
// to the first character's range.
type prependNorm string

func (p prependNorm) normalize(cs []nchar) []nchar {
	if len(cs) == 0 || p == "" {
		return cs
	}
	out := make([]nchar, 0, len(cs)+len(p))
	for _, r := range string(p) {
		out = append(out, nchar{r, cs[0].s, cs[0].e})
	}
	return append(out, cs...)
}

// replaceNorm replaces every non-overlapping occurrence of a string,
// leftmost first; the new characters map to the replaced range.
type replaceNorm struct{ pat, with string }

func (rp replaceNorm) normalize(cs []nchar) []nchar {
	s, idx := ncharString(cs)
	if !strings.Contains(s, rp.pat) {
		return cs
	}
	out := make([]nchar, 0, len(cs))
	last := 0 // next byte of s to copy
	for {
		k := strings.Index(s[last:], rp.pat)
		if k < 0 {
			break
		}
		a, b := idx[last+k], idx[last+k+len(rp.pat)]
		out = append(out, cs[idx[last]:a]...)
		for _, r := range rp.with {
			out = append(out, nchar{r, cs[a].s, cs[b-1].e})
		}
		last += k + len(rp.pat)
	}
	return append(out, cs[idx[last]:]...)
}

// stripNorm removes white space at the ends.
type stripNorm struct{ left, right bool }

func (st stripNorm) normalize(cs []nchar) []nchar {
	if st.left {
		for len(cs) > 0 && isRustSpace(cs[0].r) {
			cs = cs[1:]
		}
	}
	if st.right {
		for len(cs) > 0 && isRustSpace(cs[len(cs)-1].r) {
			cs = cs[:len(cs)-1]
		}
	}
	return cs
}
