package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/storage"
)

// Chunking says how documents longer than the model's window are embedded.
// The zero value: windows of the model's max length (256 tokens for
// all-MiniLM-L6-v2), each next one starting half a window further.
type Chunking struct {
	// Off embeds each document once, title and text joined, truncated to
	// the model's max length (anna before long documents were split).
	Off bool
	// Tokens is the window, in model tokens, the title and the model's
	// special tokens included (0: the model's max length).
	Tokens int
	// Stride is how many tokens of text each window starts after the
	// previous one (0: Tokens/2; less than Tokens overlaps them).
	Stride int
}

func (c Chunking) validate() error {
	switch {
	case c.Tokens < 0:
		return optErr("Chunking.Tokens", c.Tokens, "must be 0 (the model's max length) or positive")
	case c.Stride < 0:
		return optErr("Chunking.Stride", c.Stride, "must be 0 (half the window) or positive")
	case c.Tokens > 0 && c.Tokens < 8:
		return optErr("Chunking.Tokens", c.Tokens, "must be at least 8 (room for the text beside the special tokens)")
	case c.Tokens > 0 && c.Stride > c.Tokens:
		return optErr("Chunking.Stride", c.Stride, fmt.Sprintf("must be at most the window (%d): a stride past the window skips text", c.Tokens))
	}
	return nil
}

// String is how the chunking is recorded in the store and shown.
func (c Chunking) String() string {
	if c.Off {
		return "off"
	}
	w, s := "max", "half"
	if c.Tokens > 0 {
		w = strconv.Itoa(c.Tokens)
	}
	if c.Stride > 0 {
		s = strconv.Itoa(c.Stride)
	}
	return "window=" + w + ",stride=" + s
}

func parseChunking(s string) (Chunking, error) {
	if s == "off" {
		return Chunking{Off: true}, nil
	}
	var c Chunking
	w, st, ok := strings.Cut(s, ",")
	w, ok1 := strings.CutPrefix(w, "window=")
	st, ok2 := strings.CutPrefix(st, "stride=")
	if !ok || !ok1 || !ok2 {
		return c, fmt.Errorf("recorded chunking %q is malformed", s)
	}
	var err error
	if w != "max" {
		if c.Tokens, err = strconv.Atoi(w); err != nil {
			return c, fmt.Errorf("recorded chunking %q is malformed", s)
		}
	}
	if st != "half" {
		if c.Stride, err = strconv.Atoi(st); err != nil {
			return c, fmt.Errorf("recorded chunking %q is malformed", s)
		}
	}
	return c, nil
}

// vectorKey is where the vectors of model fp embedded with chunking ch are
// kept in the store (and what the saved graph records): the model's
// fingerprint, with the chunking when documents are split — the same model
// split another way gives other vectors.
func vectorKey(fp string, ch Chunking) string {
	if ch.Off {
		return fp
	}
	return fp + "|" + ch.String()
}

// window resolves the window and stride for a model reading maxLen tokens.
func (c Chunking) window(maxLen int) (int, int) {
	w := c.Tokens
	if w == 0 || (maxLen > 0 && w > maxLen) {
		w = maxLen
	}
	s := c.Stride
	if s == 0 {
		s = max(1, w/2)
	}
	return w, s
}

// DefaultMaxPassages is the most passages a document is embedded as when
// Options.MaxPassages is 0: with the default windows (256 tokens, each next
// one 128 further) some 65,000 tokens, a quarter of a megabyte of English.
const DefaultMaxPassages = 512

// embedBatch is how many passages embedDocs gives the encoder at once
// (Options.EmbedProgress is told after each).
const embedBatch = 1024

// maxPassagesOrDefault is the engine's cap on passages per document.
func (e *Engine) maxPassagesOrDefault() int {
	if e.opts.MaxPassages > 0 {
		return e.opts.MaxPassages
	}
	return DefaultMaxPassages
}

// embedDocs embeds docs with enc, one embedding per document: its passages
// (windows of the text, each with the title in front, see Chunking) when
// the document is longer than the window and the encoder can split; else
// one vector of title and text joined (EmbedText), which the model
// truncates. A document that fits is embedded exactly as it was before
// documents were split. Every write path (Add, Reindex, Repair) embeds
// through here.
//
// A document of more than Options.MaxPassages passages is embedded by its
// first MaxPassages, which are the first passages of the whole text (see
// splitCapped), and Logf names it; BM25 still indexes all of its text.
// Options.EmbedProgress hears of every embedBatch passages embedded.
func (e *Engine) embedDocs(ctx context.Context, enc encoder.Encoder, ch Chunking, docs []storage.Doc) ([]storage.Embedding, error) {
	sp, canSplit := encoder.SplitterOf(enc)
	limit := e.maxPassagesOrDefault()
	var texts []string
	first := make([]int, len(docs)+1) // passages of doc i: texts[first[i]:first[i+1]]
	spans := make([][]storage.Span, len(docs))
	for i, d := range docs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		first[i] = len(texts)
		var ps []encoder.Passage
		if canSplit && !ch.Off && d.Text != "" {
			prefix := ""
			if d.Title != "" {
				prefix = d.Title + " "
			}
			w, s := ch.window(sp.MaxLength())
			var cut bool
			if ps, cut = splitCapped(sp, prefix, d.Text, w, s, limit); cut {
				e.logf("document %q is longer than %d passages: its first %d (bytes 0-%d of %d) are embedded, the rest of its text only indexed for BM25 (Options.MaxPassages)",
					d.ID, limit, len(ps), ps[len(ps)-1].End, len(d.Text))
			}
		}
		if len(ps) <= 1 {
			texts = append(texts, EmbedText(Document(d)))
			spans[i] = []storage.Span{{Start: 0, End: len(d.Text)}}
			continue
		}
		for _, p := range ps {
			texts = append(texts, p.Text)
			spans[i] = append(spans[i], storage.Span{Start: p.Start, End: p.End})
		}
	}
	first[len(docs)] = len(texts)
	vecs := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += embedBatch {
		part := texts[start:min(start+embedBatch, len(texts))]
		got, err := enc.EmbedDocuments(ctx, part)
		if err != nil {
			return nil, fmt.Errorf("embedding %d documents (%d passages): %w", len(docs), len(texts), err)
		}
		if len(got) != len(part) {
			return nil, fmt.Errorf("the encoder returned %d vectors for %d texts", len(got), len(part))
		}
		vecs = append(vecs, got...)
		if e.opts.EmbedProgress != nil {
			e.opts.EmbedProgress(len(vecs), len(texts))
		}
	}
	out := make([]storage.Embedding, len(docs))
	for i := range docs {
		out[i] = storage.Embedding{Vectors: vecs[first[i]:first[i+1]], Spans: spans[i]}
	}
	return out, nil
}

// splitCapped splits text as sp.Split does and keeps at most limit
// passages; cut says whether there were more. It tokenizes only a prefix of
// a long text, cut at ASCII white space: 8 bytes per token of limit+2
// strides at first (about 1.6 times what English needs), doubled until it
// holds more than limit passages or is the whole text. The prefix's words are the text's
// words (a tokenizer splits at white space), and a window that is not the
// last one of the prefix ends where it ends in the whole text, so the
// passages kept are the whole text's first ones. Without the prefix a
// 20 MB document was tokenized whole and split into 26,050 passages.
func splitCapped(sp encoder.Splitter, prefix, text string, window, stride, limit int) ([]encoder.Passage, bool) {
	for n := max(64<<10, (limit+2)*max(stride, 1)*8); n < len(text); n *= 2 {
		end := strings.LastIndexAny(text[:n], " \t\n\r")
		if end <= 0 {
			continue
		}
		if ps := sp.Split(prefix, text[:end], window, stride); len(ps) > limit {
			return ps[:limit], true
		}
	}
	ps := sp.Split(prefix, text, window, stride)
	if len(ps) > limit {
		return ps[:limit], true
	}
	return ps, false
}
