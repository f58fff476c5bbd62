package tokenizer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

func parseDecoder(raw json.RawMessage) (decoder, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var v struct {
		Type     string            `json:"type"`
		Decoders []json.RawMessage `json:"decoders"`
		Prefix   *string           `json:"prefix"`
		Cleanup  *bool             `json:"cleanup"`
		Pattern  struct {
			String *string `json:"String"`
		} `json:"pattern"`
		Content     string `json:"content"`
		Start, Stop int
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	switch v.Type {
	case "ByteLevel":
		return byteLevelDec{}, nil
	case "ByteFallback":
		return byteFallbackDec{}, nil
	case "Fuse":
		return fuseDec{}, nil
	case "Replace":
		if v.Pattern.String == nil || *v.Pattern.String == "" {
			return nil, fmt.Errorf("Replace: only a non-empty String pattern is supported by the pure-Go tokenizer")
		}
		return replaceDec{*v.Pattern.String, v.Content}, nil
	case "Strip":
		c := []rune(v.Content)
		if len(c) != 1 {
			return nil, fmt.Errorf("Strip: content %q is not one character", v.Content)
		}
		return stripDec{c[0], v.Start, v.Stop}, nil
	case "WordPiece":
		d := wordPieceDec{prefix: "##", cleanup: true}
		if v.Prefix != nil {
			d.prefix = *v.Prefix
		}
		if v.Cleanup != nil {
			d.cleanup = *v.Cleanup
		}
		return d, nil
	case "Sequence":
		var seq seqDec
		for i, r := range v.Decoders {
			d, err := parseDecoder(r)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			if d != nil {
				seq = append(seq, d)
			}
		}
		return seq, nil
	}
	return nil, fmt.Errorf("type %q not supported by the pure-Go tokenizer (ByteLevel, ByteFallback, Fuse, Replace, Strip, WordPiece, Sequence)", v.Type)
}

type seqDec []decoder

func (s seqDec) decode(toks []string) []string {
	for _, d := range s {
		toks = d.decode(toks)
	}
	return toks
}

// byteLevelDec maps stand-in characters back to bytes (a token with a
// character outside the table is taken as its own bytes) and decodes the
// whole as UTF-8, invalid parts as U+FFFD.
type byteLevelDec struct{}

func (byteLevelDec) decode(toks []string) []string {
	var b []byte
	for _, t := range toks {
		n := len(b)
		ok := true
		for _, r := range t {
			x, in := charByte[r]
			if !in {
				ok = false
				break
			}
			b = append(b, x)
		}
		if !ok {
			b = append(b[:n], t...)
		}
	}
	return []string{lossyUTF8(b)}
}

// lossyUTF8 is Rust's String::from_utf8_lossy: one U+FFFD per maximal
// invalid subpart (the same rule as cleanText, NUL kept).
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	s := string(b)
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			sb.WriteByte(s[i])
			i++
			continue
		}
		n := validPrefix(s[i:])
		if n > 0 {
			sb.WriteString(s[i : i+n])
			i += n
			continue
		}
		sb.WriteRune(utf8.RuneError)
		i += -n
	}
	return sb.String()
}

// byteFallbackDec turns runs of <0xXX> tokens into their text, or one
// U+FFFD per byte when the run is not valid UTF-8.
type byteFallbackDec struct{}

func (byteFallbackDec) decode(toks []string) []string {
	out := make([]string, 0, len(toks))
	var pend []byte
	flush := func() {
		if len(pend) == 0 {
			return
		}
		if utf8.Valid(pend) {
			out = append(out, string(pend))
		} else {
			for range pend {
				out = append(out, "\uFFFD")
			}
		}
		pend = pend[:0]
	}
	for _, t := range toks {
		if len(t) == 6 && strings.HasPrefix(t, "<0x") && t[5] == '>' {
			if x, err := strconv.ParseUint(t[3:5], 16, 8); err == nil {
				pend = append(pend, byte(x))
				continue
			}
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

type fuseDec struct{}

func (fuseDec) decode(toks []string) []string { return []string{strings.Join(toks, "")} }

type replaceDec struct{ pat, with string }

func (r replaceDec) decode(toks []string) []string {
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(t, r.pat, r.with)
	}
	return toks
}

// stripDec removes up to start leading and stop trailing copies of a
// character from every token.
type stripDec struct {
	c           rune
	start, stop int
}

func (d stripDec) decode(toks []string) []string {
	for i, t := range toks {
		rs := []rune(t)
		a, z := 0, len(rs)
		for a < min(d.start, len(rs)) && rs[a] == d.c {
			a++
		}
		for k := 0; k < d.stop && z > a && rs[z-1] == d.c; k++ {
			z--
		}
		toks[i] = string(rs[a:z])
	}
	return toks
}

// wordPieceDec joins word pieces: prefix removed, a space before every
// other token, and Hugging Face's clean-up of spaces before punctuation.
type wordPieceDec struct {
	prefix  string
	cleanup bool
}

// wpCleanup is tokenizers' cleanup, applied in this order.
var wpCleanup = [][2]string{{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}}

func (d wordPieceDec) decode(toks []string) []string {
	for i, t := range toks {
		if i != 0 {
			if p, ok := strings.CutPrefix(t, d.prefix); ok {
				t = p
			} else {
				t = " " + t
			}
		}
		if d.cleanup {
			for _, r := range wpCleanup {
				t = strings.ReplaceAll(t, r[0], r[1])
			}
		}
		toks[i] = t
	}
	return toks
}
