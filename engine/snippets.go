package engine

import (
	"context"
	"fmt"

	"github.com/anna-search/anna/internal/snippet"
	"github.com/anna-search/anna/lang"
)

// snippets attaches a Snippet to each result (see Snippet for the choice
// of fragment). passage holds the dense list's best passage per document.
// The work per result is bounded (package snippet: at most
// snippet.MaxAnalysed bytes analysed), and it stops with ctx's error when
// ctx is cancelled.
func (e *Engine) snippets(ctx context.Context, query string, rs []Result, passage map[string]int, size int) error {
	key := e.vecKey()
	for i := range rs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("engine: snippets: %w", err)
		}
		r := &rs[i]
		hl, err := e.highlighter(e.docLanguage(r))
		if err != nil {
			return err
		}
		var s snippet.Snippet
		source := ""
		if p, ok := passage[r.ID]; ok && denseFirst(r.Explain) {
			emb, found, err := e.store.Vector(key, r.ID)
			if err != nil {
				return fmt.Errorf("engine: snippet of %q: %w", r.ID, err)
			}
			// A document of one passage is the whole text: the lexical
			// fragment below is the same search over it.
			if found && len(emb.Spans) > 1 && p < len(emb.Spans) {
				sp := emb.Spans[p]
				if s, err = hl.PassageContext(ctx, r.Text, sp.Start, sp.End, query, size); err != nil {
					return fmt.Errorf("engine: snippet of %q: %w", r.ID, err)
				}
				source = "passage"
			}
		}
		if source == "" {
			var ok bool
			if s, ok, err = hl.LexicalContext(ctx, r.Text, query, size); err != nil {
				return fmt.Errorf("engine: snippet of %q: %w", r.ID, err)
			}
			if ok {
				source = "lexical"
			} else {
				// No query term in the text: its beginning (no term to
				// look for, so no analysis).
				s, source = hl.Passage(r.Text, 0, len(r.Text), "", size), "lead"
			}
		}
		out := &Snippet{Text: r.Text[s.Start:s.End], Start: s.Start, End: s.End, Source: source}
		for _, h := range s.Highlights {
			out.Highlights = append(out.Highlights, Span{Start: h.Start, End: h.End})
		}
		r.Snippet = out
	}
	return nil
}

// denseFirst reports whether the dense list ranked a result at least as
// well as the lexical list (or the lexical list did not return it).
func denseFirst(ex []Contribution) bool {
	lex, dense := 0, 0
	for _, c := range ex {
		switch c.List {
		case "lexical":
			lex = c.Rank
		case "dense":
			dense = c.Rank
		}
	}
	return dense > 0 && (lex == 0 || dense <= lex)
}

// highlighter reads texts of language code as BM25 does; each is made on
// first use (most searches show no snippets).
func (e *Engine) highlighter(code string) (*snippet.Highlighter, error) {
	e.hl.mu.Lock()
	defer e.hl.mu.Unlock()
	if h, ok := e.hl.m[code]; ok {
		return h, nil
	}
	h, err := snippet.NewFor(code)
	if err != nil {
		return nil, fmt.Errorf("engine: snippets: %w", err)
	}
	if e.hl.m == nil {
		e.hl.m = map[string]*snippet.Highlighter{}
	}
	e.hl.m[code] = h
	return h, nil
}

// docLanguage is the language BM25 read r's document in: as given, else
// as the local BM25 index recorded it, else (another backend) as detected.
func (e *Engine) docLanguage(r *Result) string {
	if r.Language != "" {
		return r.Language
	}
	if loc := e.local(); loc != nil && loc.lex != nil {
		if l, ok, err := loc.lex.LanguageOf(r.ID); err == nil && ok {
			return l
		}
	}
	if l := lang.Detect(r.Title + "\n" + r.Text); l != "" {
		return l
	}
	return lang.English
}
