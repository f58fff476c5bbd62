package tokenizer

import (
	"encoding/json"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// gpt2Pattern is GPT-2's pre-tokeniser regex, which Hugging Face's
// ByteLevel uses; Go's regexp has no look-ahead, so gpt2Split implements it
// by hand.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var v struct {
		Type             string            `json:"type"`
		AddPrefixSpace   *bool             `json:"add_prefix_space"`
		UseRegex         *bool             `json:"use_regex"`
		IndividualDigits bool              `json:"individual_digits"`
		Pretokenizers    []json.RawMessage `json:"pretokenizers"`
		Pattern          struct {
			String *string `json:"String"`
			Regex  *string `json:"Regex"`
		} `json:"pattern"`
		Behavior string `json:"behavior"`
		Invert   bool   `json:"invert"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	switch v.Type {
	case "BertPreTokenizer":
		return bertPre{}, nil
	case "WhitespaceSplit":
		return wsSplitPre{}, nil
	case "ByteLevel":
		return byteLevelPre{
			prefix: v.AddPrefixSpace == nil || *v.AddPrefixSpace,
			regex:  v.UseRegex == nil || *v.UseRegex,
		}, nil
	case "Digits":
		return digitsPre{v.IndividualDigits}, nil
	case "Split":
		if v.Pattern.Regex != nil && *v.Pattern.Regex == gpt2Pattern && v.Behavior == "Isolated" && !v.Invert {
			return byteLevelPre{regex: true, noBytes: true}, nil
		}
		return nil, fmt.Errorf("Split %s (behavior %s): only GPT-2's regex, isolated, is supported by the pure-Go tokenizer", string(raw), v.Behavior)
	case "Sequence":
		var seq seqPre
		for i, r := range v.Pretokenizers {
			p, err := parsePreTokenizer(r)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			if p != nil {
				seq = append(seq, p)
			}
		}
		return seq, nil
	}
	return nil, fmt.Errorf("type %q not supported by the pure-Go tokenizer (BertPreTokenizer, WhitespaceSplit, ByteLevel, Digits, Split with GPT-2's regex, Sequence)", v.Type)
}

type seqPre []preTokenizer

func (s seqPre) split(cs []nchar) [][]nchar {
	words := [][]nchar{cs}
	for _, p := range s {
		var next [][]nchar
		for _, w := range words {
			next = append(next, p.split(w)...)
		}
		words = next
	}
	return words
}

// bertPre splits on white space (dropped) and isolates punctuation.
type bertPre struct{}

func isBertPunct(r rune) bool {
	if r < 0x80 {
		return r >= 0x21 && r <= 0x2F || r >= 0x3A && r <= 0x40 || r >= 0x5B && r <= 0x60 || r >= 0x7B && r <= 0x7E
	}
	return unicode.IsPunct(r)
}

func (bertPre) split(cs []nchar) [][]nchar {
	var out [][]nchar
	start := -1
	for i, c := range cs {
		switch {
		case isRustSpace(c.r):
			if start >= 0 {
				out = append(out, cs[start:i])
				start = -1
			}
		case isBertPunct(c.r):
			if start >= 0 {
				out = append(out, cs[start:i])
				start = -1
			}
			out = append(out, cs[i:i+1])
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if start >= 0 {
		out = append(out, cs[start:])
	}
	return out
}

type wsSplitPre struct{}

func (wsSplitPre) split(cs []nchar) [][]nchar {
	var out [][]nchar
	start := -1
	for i, c := range cs {
		if isRustSpace(c.r) {
			if start >= 0 {
				out = append(out, cs[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, cs[start:])
	}
	return out
}

// digitsPre isolates digits: each one, or each run of them.
type digitsPre struct{ individual bool }

func (d digitsPre) split(cs []nchar) [][]nchar {
	var out [][]nchar
	start := 0
	for i := 0; i < len(cs); i++ {
		if !unicode.IsDigit(cs[i].r) {
			continue
		}
		j := i + 1
		if !d.individual {
			for j < len(cs) && unicode.IsDigit(cs[j].r) {
				j++
			}
		}
		if start < i {
			out = append(out, cs[start:i])
		}
		out = append(out, cs[i:j])
		start = j
		i = j - 1
	}
	if start < len(cs) {
		out = append(out, cs[start:])
	}
	return out
}

// byteLevelPre is Hugging Face's ByteLevel pre-tokeniser: a space
// prepended when asked (and missing), GPT-2's regex split, then every
// UTF-8 byte mapped to its printable stand-in character (noBytes: the
// split alone, for a Split pre-tokeniser with GPT-2's regex).
type byteLevelPre struct{ prefix, regex, noBytes bool }

func (b byteLevelPre) split(cs []nchar) [][]nchar {
	if b.prefix && len(cs) > 0 && cs[0].r != ' ' {
		cs = append([]nchar{{' ', cs[0].s, cs[0].s}}, cs...)
	}
	words := [][]nchar{cs}
	if b.regex {
		words = gpt2Split(cs)
	}
	if b.noBytes {
		return words
	}
	var buf [utf8.UTFMax]byte
	for i, w := range words {
		n := 0
		for _, c := range w {
			n += utf8.RuneLen(c.r)
		}
		mapped := make([]nchar, 0, n)
		for _, c := range w {
			k := utf8.EncodeRune(buf[:], c.r)
			for _, x := range buf[:k] {
				mapped = append(mapped, nchar{byteChar[x], c.s, c.e})
			}
		}
		words[i] = mapped
	}
	return words
}

// byteChar is GPT-2's bytes_to_unicode table.
var byteChar = func() [256]rune {
	var t [256]rune
	n := 0
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF {
			t[b] = rune(b)
		} else {
			t[b] = rune(256 + n)
			n++
		}
	}
	return t
}()

// charByte inverts byteChar.
var charByte = func() map[rune]byte {
	m := make(map[rune]byte, 256)
	for b, r := range byteChar {
		m[r] = byte(b)
	}
	return m
}()

// gpt2Split cuts cs as gpt2Pattern matches it (each match a word; the
// pattern matches every character, so nothing is left between matches).
func gpt2Split(cs []nchar) [][]nchar {
	var out [][]nchar
	n := len(cs)
	isL := func(i int) bool { return i < n && unicode.IsLetter(cs[i].r) }
	isN := func(i int) bool { return i < n && unicode.IsNumber(cs[i].r) }
	isS := func(i int) bool { return i < n && isRustSpace(cs[i].r) }
	isO := func(i int) bool { return i < n && !isL(i) && !isN(i) && !isS(i) }
	run := func(j int, f func(int) bool) int {
		for f(j) {
			j++
		}
		return j
	}
	for i := 0; i < n; {
		end := 0
		r := cs[i].r
		if r == '\'' && i+1 < n {
			switch c := cs[i+1].r; {
			case c == 's' || c == 't' || c == 'm' || c == 'd':
				end = i + 2
			case i+2 < n && (c == 'r' && cs[i+2].r == 'e' || c == 'v' && cs[i+2].r == 'e' || c == 'l' && cs[i+2].r == 'l'):
				end = i + 3
			}
		}
		if end == 0 {
			j := i
			if r == ' ' {
				j = i + 1
			}
			switch {
			case isL(j):
				end = run(j, isL)
			case isN(j):
				end = run(j, isN)
			case isO(j):
				end = run(j, isO)
			default: // white space at i
				k := run(i, isS)
				switch {
				case k == n || k-i == 1:
					end = k
				default:
					end = k - 1
				}
			}
		}
		out = append(out, cs[i:end])
		i = end
	}
	return out
}
