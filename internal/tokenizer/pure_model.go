package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

func parseModel(raw json.RawMessage) (vocabModel, error) {
	var v struct {
		Type                    string           `json:"type"`
		Vocab                   map[string]int64 `json:"vocab"`
		UnkToken                *string          `json:"unk_token"`
		ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
		MaxInputCharsPerWord    *int             `json:"max_input_chars_per_word"`
		FuseUnk                 bool             `json:"fuse_unk"`
		ByteFallback            bool             `json:"byte_fallback"`
		IgnoreMerges            bool             `json:"ignore_merges"`
		Dropout                 *float64         `json:"dropout"`
		Merges                  json.RawMessage  `json:"merges"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	rev := make(map[int64]string, len(v.Vocab))
	for tok, id := range v.Vocab {
		rev[id] = tok
	}
	switch v.Type {
	case "WordPiece":
		w := &wordPiece{vocab: v.Vocab, rev: rev, prefix: "##", maxChars: 100, unk: -1}
		if v.ContinuingSubwordPrefix != nil {
			w.prefix = *v.ContinuingSubwordPrefix
		}
		if v.MaxInputCharsPerWord != nil {
			w.maxChars = *v.MaxInputCharsPerWord
		}
		unk := "[UNK]"
		if v.UnkToken != nil {
			unk = *v.UnkToken
		}
		id, ok := v.Vocab[unk]
		if !ok {
			return nil, fmt.Errorf("WordPiece: unk_token %q is not in the vocabulary", unk)
		}
		w.unk = id
		return w, nil
	case "BPE":
		if v.ContinuingSubwordPrefix != nil && *v.ContinuingSubwordPrefix != "" || v.EndOfWordSuffix != nil && *v.EndOfWordSuffix != "" {
			return nil, fmt.Errorf("BPE: continuing_subword_prefix and end_of_word_suffix are not supported by the pure-Go tokenizer")
		}
		if v.Dropout != nil && *v.Dropout > 0 {
			return nil, fmt.Errorf("BPE: dropout is not supported by the pure-Go tokenizer")
		}
		b := &bpe{vocab: v.Vocab, rev: rev, unk: -1, fuseUnk: v.FuseUnk, byteFallback: v.ByteFallback, ignoreMerges: v.IgnoreMerges}
		if v.UnkToken != nil {
			if id, ok := v.Vocab[*v.UnkToken]; ok {
				b.unk = id
			}
		}
		for i := range b.byteTok {
			b.byteTok[i] = -1
			if id, ok := v.Vocab[fmt.Sprintf("<0x%02X>", i)]; ok {
				b.byteTok[i] = id
			}
		}
		var merges []json.RawMessage
		if len(v.Merges) > 0 && string(v.Merges) != "null" {
			if err := json.Unmarshal(v.Merges, &merges); err != nil {
				return nil, fmt.Errorf("BPE merges: %w", err)
			}
		}
		b.merges = make(map[[2]int64]merge, len(merges))
		for i, m := range merges {
			var pair [2]string
			var s string
			if err := json.Unmarshal(m, &s); err == nil {
				a, c, ok := strings.Cut(s, " ")
				if !ok {
					return nil, fmt.Errorf("BPE merges[%d] %q: want two tokens separated by a space", i, s)
				}
				pair = [2]string{a, c}
			} else if err := json.Unmarshal(m, &pair); err != nil {
				return nil, fmt.Errorf("BPE merges[%d]: want \"a b\" or [a, b]: %w", i, err)
			}
			a, okA := v.Vocab[pair[0]]
			c, okC := v.Vocab[pair[1]]
			id, okN := v.Vocab[pair[0]+pair[1]]
			if !okA || !okC || !okN {
				return nil, fmt.Errorf("BPE merges[%d] %q: a token is not in the vocabulary", i, pair)
			}
			if _, dup := b.merges[[2]int64{a, c}]; !dup {
				b.merges[[2]int64{a, c}] = merge{i, id}
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("type %q not supported by the pure-Go tokenizer (WordPiece, BPE)", v.Type)
}

// wordPiece is greedy longest-match-first WordPiece: a word with more than
// maxChars characters, or with a part no vocabulary entry matches, is the
// unknown token.
type wordPiece struct {
	vocab    map[string]int64
	rev      map[int64]string
	prefix   string
	maxChars int
	unk      int64
}

func (w *wordPiece) idToToken(id int64) (string, bool) { s, ok := w.rev[id]; return s, ok }

func (w *wordPiece) tokenize(word []nchar, out []token) []token {
	if len(word) > w.maxChars {
		return append(out, token{w.unk, word[0].s, word[len(word)-1].e})
	}
	s, idx := ncharString(word)
	n0 := len(out)
	buf := make([]byte, 0, len(w.prefix)+len(s))
	for start := 0; start < len(s); {
		end := len(s)
		found := false
		for start < end {
			buf = buf[:0]
			if start > 0 {
				buf = append(buf, w.prefix...)
			}
			buf = append(buf, s[start:end]...)
			if id, ok := w.vocab[string(buf)]; ok {
				out = append(out, token{id, word[idx[start]].s, word[idx[end]-1].e})
				found = true
				break
			}
			_, k := utf8.DecodeLastRuneInString(s[start:end])
			end -= k
		}
		if !found {
			return append(out[:n0], token{w.unk, word[0].s, word[len(word)-1].e})
		}
		start = end
	}
	return out
}

type merge struct {
	rank int
	id   int64
}

// bpe is Hugging Face's BPE model: characters (or, with byte fallback,
// their <0xXX> byte tokens, or the unknown token) merged pair by pair,
// lowest rank first and leftmost among equals.
type bpe struct {
	vocab                               map[string]int64
	rev                                 map[int64]string
	merges                              map[[2]int64]merge
	unk                                 int64
	byteTok                             [256]int64
	fuseUnk, byteFallback, ignoreMerges bool
}

func (b *bpe) idToToken(id int64) (string, bool) { s, ok := b.rev[id]; return s, ok }

// symbol is a BPE part: its id, character range [s, e) in the word and
// neighbours (-1: none); e == s after it was merged into its left one.
type symbol struct {
	id         int64
	s, e       int
	prev, next int
}

type cand struct {
	pos, rank int
	id        int64
}

func (b *bpe) tokenize(word []nchar, out []token) []token {
	var rb [utf8.UTFMax]byte
	if b.ignoreMerges {
		s, _ := ncharString(word)
		if id, ok := b.vocab[s]; ok {
			return append(out, token{id, word[0].s, word[len(word)-1].e})
		}
	}
	syms := make([]symbol, 0, len(word))
	add := func(id int64, s, e int) {
		syms = append(syms, symbol{id: id, s: s, e: e, prev: len(syms) - 1, next: len(syms) + 1})
	}
	unkS, unkE := -1, -1 // pending unknown run
	for i, c := range word {
		n := utf8.EncodeRune(rb[:], c.r)
		if id, ok := b.vocab[string(rb[:n])]; ok {
			if unkS >= 0 {
				add(b.unk, unkS, unkE)
				unkS = -1
			}
			add(id, i, i+1)
			continue
		}
		if b.byteFallback {
			all := true
			for _, x := range rb[:n] {
				all = all && b.byteTok[x] >= 0
			}
			if all {
				// As Hugging Face: a pending unknown run is not flushed
				// before the byte tokens.
				for _, x := range rb[:n] {
					add(b.byteTok[x], i, i+1)
				}
				continue
			}
		}
		if b.unk >= 0 {
			switch {
			case unkS >= 0 && b.fuseUnk:
				unkE = i + 1
			case unkS >= 0:
				add(b.unk, unkS, unkE)
				unkS, unkE = i, i+1
			default:
				unkS, unkE = i, i+1
			}
		}
	}
	if unkS >= 0 {
		add(b.unk, unkS, unkE)
	}
	if len(syms) == 0 {
		return out
	}
	syms[len(syms)-1].next = -1

	// A binary min-heap of candidate merges by (rank, pos).
	var h []cand
	less := func(x, y cand) bool { return x.rank < y.rank || x.rank == y.rank && x.pos < y.pos }
	push := func(c cand) {
		h = append(h, c)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if !less(h[i], h[p]) {
				break
			}
			h[i], h[p] = h[p], h[i]
			i = p
		}
	}
	pop := func() cand {
		top := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		for i := 0; ; {
			l, r, m := 2*i+1, 2*i+2, i
			if l < len(h) && less(h[l], h[m]) {
				m = l
			}
			if r < len(h) && less(h[r], h[m]) {
				m = r
			}
			if m == i {
				break
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
		return top
	}
	for i := 0; i+1 < len(syms); i++ {
		if m, ok := b.merges[[2]int64{syms[i].id, syms[i+1].id}]; ok {
			push(cand{i, m.rank, m.id})
		}
	}
	for len(h) > 0 {
		c := pop()
		cur := &syms[c.pos]
		if cur.e == cur.s || cur.next < 0 {
			continue
		}
		nx := &syms[cur.next]
		if m, ok := b.merges[[2]int64{cur.id, nx.id}]; !ok || m.id != c.id {
			continue
		}
		cur.id, cur.e = c.id, nx.e
		nx.e = nx.s // gone
		cur.next = nx.next
		if cur.next >= 0 {
			syms[cur.next].prev = c.pos
		}
		if cur.prev >= 0 {
			if m, ok := b.merges[[2]int64{syms[cur.prev].id, cur.id}]; ok {
				push(cand{cur.prev, m.rank, m.id})
			}
		}
		if cur.next >= 0 {
			if m, ok := b.merges[[2]int64{cur.id, syms[cur.next].id}]; ok {
				push(cand{c.pos, m.rank, m.id})
			}
		}
	}
	for i := 0; i >= 0; i = syms[i].next {
		s := syms[i]
		out = append(out, token{s.id, word[s.s].s, word[s.e-1].e})
	}
	return out
}
