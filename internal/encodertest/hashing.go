// Package encodertest provides a deterministic, dependency-free encoder for
// tests of the machinery around the model (storage, indexes, crash safety,
// concurrency). It is not a language model: quality tests use the real one.
//
// A nil context.Context given to a function of this package is
// context.Background().
package encodertest

import (
	"context"
	"hash/fnv"
	"math"
	"strings"
	"sync/atomic"
	"unicode"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/safe"
)

// Hashing embeds a text as the L2-normalised sum of one random ±1 vector per
// lowercased word (feature hashing), so texts sharing words are close.
type Hashing struct {
	D      int    // dimensions
	FP     string // fingerprint; tests change it to simulate another model
	MaxLen int    // words per window when splitting (0: 256)
}

// MaxLength is the default window of Split, in words.
func (h *Hashing) MaxLength() int {
	if h.MaxLen > 0 {
		return h.MaxLen
	}
	return 256
}

var _ encoder.Encoder = (*Hashing)(nil)

func (h *Hashing) Dim() int            { return h.D }
func (h *Hashing) Fingerprint() string { return h.FP }

func (h *Hashing) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	ctx = safe.Ctx(ctx)
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[i] = h.embed(t)
	}
	return out, nil
}

func (h *Hashing) EmbedQueries(ctx context.Context, queries []string, p encoder.Prompt) ([][]float32, error) {
	ctx = safe.Ctx(ctx)
	return h.EmbedDocuments(ctx, queries)
}

func (h *Hashing) embed(text string) []float32 {
	v := make([]float32, h.D)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		f := fnv.New64a()
		f.Write([]byte(w))
		x := f.Sum64()
		for j := range v {
			// xorshift stream seeded by the word's hash
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			if x&1 == 0 {
				v[j]++
			} else {
				v[j]--
			}
		}
	}
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		v[0] = 1
		return v
	}
	s := float32(1 / math.Sqrt(n))
	for j := range v {
		v[j] *= s
	}
	return v
}

var _ encoder.Splitter = (*Hashing)(nil)

// Split implements encoder.Splitter on white-space-separated words, each
// one token, the prefix's words included in every window (no special
// tokens), so that engine tests can exercise long documents without a
// model.
func (h *Hashing) Split(prefix, text string, window, stride int) []encoder.Passage {
	type span struct{ s, e int }
	var words []span
	for i := 0; i < len(text); {
		for i < len(text) && unicode.IsSpace(rune(text[i])) {
			i++
		}
		j := i
		for j < len(text) && !unicode.IsSpace(rune(text[j])) {
			j++
		}
		if j > i {
			words = append(words, span{i, j})
		}
		i = j
	}
	if len(words) == 0 {
		return nil
	}
	room := max(1, window-len(strings.Fields(prefix)))
	stride = min(max(stride, 1), room)
	if len(words) <= room {
		return []encoder.Passage{{Text: prefix + text, Start: 0, End: len(text)}}
	}
	var out []encoder.Passage
	for start := 0; ; start += stride {
		end := min(start+room, len(words))
		s, e := words[start].s, words[end-1].e
		out = append(out, encoder.Passage{Text: prefix + text[s:e], Start: s, End: e})
		if end == len(words) {
			return out
		}
	}
}

// Counting is a Hashing encoder that counts the document texts it embeds
// (passages included): what tests of "nothing embedded again" read.
type Counting struct {
	*Hashing
	n atomic.Int64
}

// EmbedDocuments embeds texts as Hashing does and counts them.
func (c *Counting) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	ctx = safe.Ctx(ctx)
	c.n.Add(int64(len(texts)))
	return c.Hashing.EmbedDocuments(ctx, texts)
}

// Embedded is how many texts EmbedDocuments has embedded.
func (c *Counting) Embedded() int64 { return c.n.Load() }
