package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// pure is the pure-Go implementation of the tokenizer.json subset anna's
// models use (see the package doc): added tokens, normaliser,
// pre-tokeniser, vocabulary model and decoder. It is immutable after
// newPure, so safe for concurrent use.
type pure struct {
	norm  normalizer   // nil: none
	pre   preTokenizer // nil: none
	model vocabModel
	dec   decoder // nil: tokens joined by spaces

	raw, normed *addedMatcher // added tokens matched on raw / normalised text
	idToTok     map[int64]string
	special     map[int64]bool
}

// nchar is one character of a normalised text and the byte range of the
// original text it came from.
type nchar struct {
	r    rune
	s, e int
}

// token is one vocabulary id and its original byte range.
type token struct {
	id   int64
	s, e int
}

type normalizer interface{ normalize([]nchar) []nchar }

type preTokenizer interface {
	// split cuts a normalised piece into words (possibly transformed, as
	// ByteLevel maps bytes to characters).
	split([]nchar) [][]nchar
}

type vocabModel interface {
	tokenize(word []nchar, out []token) []token
	idToToken(id int64) (string, bool)
}

type decoder interface{ decode([]string) []string }

func (p *pure) close() error { return nil }

func (p *pure) name() string { return "pure" }

// newPure builds the pure implementation from a parsed tokenizer.json.
func newPure(top map[string]json.RawMessage) (*pure, error) {
	p := &pure{idToTok: map[int64]string{}, special: map[int64]bool{}}
	var err error
	if p.norm, err = parseNormalizer(top["normalizer"]); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	if p.pre, err = parsePreTokenizer(top["pre_tokenizer"]); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	if p.model, err = parseModel(top["model"]); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if p.dec, err = parseDecoder(top["decoder"]); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	var added []struct {
		ID         int64  `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		Lstrip     bool   `json:"lstrip"`
		Rstrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	if a := top["added_tokens"]; len(a) > 0 && string(a) != "null" {
		if err := json.Unmarshal(a, &added); err != nil {
			return nil, fmt.Errorf("added_tokens: %w", err)
		}
	}
	p.raw, p.normed = &addedMatcher{}, &addedMatcher{}
	for i, a := range added {
		if a.Content == "" {
			return nil, fmt.Errorf("added_tokens[%d] (id %d): empty content", i, a.ID)
		}
		p.idToTok[a.ID] = a.Content
		if a.Special {
			p.special[a.ID] = true
		}
		at := addedTok{id: a.ID, content: a.Content, singleWord: a.SingleWord, lstrip: a.Lstrip, rstrip: a.Rstrip}
		if a.Normalized && p.norm != nil {
			// Hugging Face matches normalised added tokens in their
			// normalised form.
			at.content = runesString(p.norm.normalize(toNchars(a.Content, 0)))
			if at.content == "" {
				continue
			}
			p.normed.add(at)
		} else {
			p.raw.add(at)
		}
	}
	return p, nil
}

// toNchars is s as characters, each mapped to its own byte range (plus base).
func toNchars(s string, base int) []nchar {
	out := make([]nchar, 0, len(s))
	for i, r := range s {
		out = append(out, nchar{r, base + i, base + i + utf8.RuneLen(r)})
	}
	return out
}

func runesString(cs []nchar) string {
	var b strings.Builder
	b.Grow(len(cs))
	for _, c := range cs {
		b.WriteRune(c.r)
	}
	return b.String()
}

// encode returns text's ids (no special tokens added) and each id's byte
// range in text. text is valid UTF-8 (cleanText).
func (p *pure) encode(text string, offsets bool) ([]int64, [][2]int) {
	var toks []token
	for _, seg := range p.raw.split(text) {
		if seg.id >= 0 {
			toks = append(toks, token{seg.id, seg.s, seg.e})
			continue
		}
		cs := toNchars(text[seg.s:seg.e], seg.s)
		if p.norm != nil {
			cs = p.norm.normalize(cs)
		}
		if len(cs) == 0 {
			continue
		}
		pieces := [][]nchar{cs}
		if len(p.normed.toks) > 0 {
			pieces = pieces[:0]
			str, idx := ncharString(cs)
			for _, m := range p.normed.split(str) {
				a, b := idx[m.s], idx[m.e]
				if m.id >= 0 {
					if b > a {
						toks = append(toks, token{m.id, cs[a].s, cs[b-1].e})
					}
					continue
				}
				if b > a {
					pieces = append(pieces, cs[a:b])
				}
			}
		}
		for _, pc := range pieces {
			words := [][]nchar{pc}
			if p.pre != nil {
				words = p.pre.split(pc)
			}
			for _, w := range words {
				if len(w) > 0 {
					toks = p.model.tokenize(w, toks)
				}
			}
		}
	}
	ids := make([]int64, len(toks))
	var offs [][2]int
	if offsets {
		offs = make([][2]int, len(toks))
	}
	for i, t := range toks {
		ids[i] = t.id
		if offsets {
			offs[i] = [2]int{t.s, t.e}
		}
	}
	return ids, offs
}

// ncharString is the characters as a string and, for every byte position
// of it (and its end), the index of the character starting there.
func ncharString(cs []nchar) (string, []int) {
	var b strings.Builder
	idx := make([]int, 0, len(cs)+1)
	for i, c := range cs {
		n := utf8.RuneLen(c.r)
		for range n {
			idx = append(idx, i)
		}
		b.WriteRune(c.r)
	}
	idx = append(idx, len(cs))
	return b.String(), idx
}

// decode turns ids into text as Hugging Face's Tokenizer.decode does:
// unknown ids are skipped, special added tokens too when skipSpecial.
func (p *pure) decode(ids []int64, skipSpecial bool) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		s, ok := p.idToTok[id]
		if !ok {
			if s, ok = p.model.idToToken(id); !ok {
				continue
			}
		}
		if skipSpecial && p.special[id] {
			continue
		}
		toks = append(toks, s)
	}
	if p.dec == nil {
		return strings.Join(toks, " ")
	}
	return strings.Join(p.dec.decode(toks), "")
}

// addedTok is an added token as its matcher sees it.
type addedTok struct {
	id                         int64
	content                    string
	singleWord, lstrip, rstrip bool
}

// addedMatcher finds added tokens leftmost-longest, as Hugging Face's
// Aho-Corasick matcher does.
type addedMatcher struct {
	toks    []addedTok
	byFirst [256][]int // indices into toks, longest first
}

func (m *addedMatcher) add(t addedTok) {
	for _, o := range m.toks {
		if o.content == t.content {
			return // the first one wins, as in Hugging Face's map
		}
	}
	m.toks = append(m.toks, t)
	l := &m.byFirst[t.content[0]]
	i := len(*l)
	for i > 0 && len(m.toks[(*l)[i-1]].content) < len(t.content) {
		i--
	}
	*l = append(*l, 0)
	copy((*l)[i+1:], (*l)[i:])
	(*l)[i] = len(m.toks) - 1
}

// segment is a byte range of a text, an added token's id or -1.
type segment struct {
	id   int64
	s, e int
}

// split cuts s into added tokens and the text between them (non-empty
// ranges only), applying single_word, lstrip and rstrip as Hugging Face's
// AddedVocabulary.find_matches does.
func (m *addedMatcher) split(s string) []segment {
	if len(m.toks) == 0 {
		if s == "" {
			return nil
		}
		return []segment{{-1, 0, len(s)}}
	}
	var out []segment
	start := 0
	for i := 0; i < len(s); {
		var hit *addedTok
		for _, k := range m.byFirst[s[i]] {
			if strings.HasPrefix(s[i:], m.toks[k].content) {
				hit = &m.toks[k]
				break
			}
		}
		if hit == nil {
			i++
			continue
		}
		ms, me := i, i+len(hit.content)
		i = me
		if hit.singleWord {
			r, _ := utf8.DecodeLastRuneInString(s[:ms])
			q, _ := utf8.DecodeRuneInString(s[me:])
			if (ms > 0 && isWordChar(r)) || (me < len(s) && isWordChar(q)) {
				continue
			}
		}
		if hit.lstrip {
			ns := strings.LastIndexFunc(s[:ms], func(r rune) bool { return !isRustSpace(r) })
			if ns < 0 {
				ns = 0
			} else {
				_, n := utf8.DecodeRuneInString(s[ns:])
				ns += n
			}
			ms = max(ns, start)
		}
		if hit.rstrip {
			k := strings.IndexFunc(s[me:], func(r rune) bool { return !isRustSpace(r) })
			if k < 0 {
				k = len(s) - me
			}
			me += k
		}
		if start < ms {
			out = append(out, segment{-1, start, ms})
		}
		out = append(out, segment{hit.id, ms, me})
		start = me
		i = max(i, me)
	}
	if start < len(s) {
		out = append(out, segment{-1, start, len(s)})
	}
	return out
}
