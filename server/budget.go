package server

import (
	"context"
	"strconv"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/clip"
	"github.com/anna-search/anna/rerank"
)

// Budgets: what one request may make the model do, counted before any
// model work and under the request's deadline. A text is bounded by
// Limits.MaxTextBytes (and the model reads at most its window of it: the
// tokenizer reads only a long text's head, so counting costs what the
// window costs, not what the text does); a request by
// Limits.MaxRequestTokens, model tokens in all: the embeddings' inputs as
// the model reads them, the rerank pairs as the reranker reads them, the
// documents' texts up to what the engine embeds of each. Counting stops
// at the first text over either bound, or when the request's context ends
// (its deadline: the counting of a 15 MB input once ran 51 s past a 30 s
// timeout).

// checkText refuses a text over Limits.MaxTextBytes; what names it.
func (s *Server) checkText(what string, text string) error {
	if len(text) > s.lim.MaxTextBytes {
		return overLimit("%s: %d bytes, over the limit of %d bytes a text (Limits.MaxTextBytes)", what, len(text), s.lim.MaxTextBytes).with(hint.Action{Kind: hint.SetOption, Option: "server.Limits.MaxTextBytes"})
	}
	return nil
}

// overBudget is the error of a request whose texts come to more than
// Limits.MaxRequestTokens model tokens (at least tokens).
func (s *Server) overBudget(what string, tokens int) error {
	return overLimit("%s: at least %d model tokens in one request, over the limit of %d (Limits.MaxRequestTokens): send fewer or shorter texts per request", what, tokens, s.lim.MaxRequestTokens).with(hint.Action{Kind: hint.SetOption, Option: "server.Limits.MaxRequestTokens"})
}

// countInputs counts the model tokens of /v1/embeddings inputs as the
// model reads them (truncated to its window), refusing a text over
// MaxTextBytes or a request over MaxRequestTokens.
func (s *Server) countInputs(ctx context.Context, field string, texts []string) (int, error) {
	return s.countTexts(ctx, field, len(texts),
		func(i int) string { return inputName(field, i, len(texts)) },
		func(i int) string { return texts[i] },
		func(i int) int { return s.tokens.count(texts[i]) })
}

func inputName(field string, i, n int) string {
	if n == 1 {
		return field
	}
	return field + "[" + strconv.Itoa(i) + "]"
}

// countPairs counts the model tokens of rerank pairs as the reranker reads
// them (pt nil: it does not count them, and only the text sizes are
// checked), refusing a document over MaxTextBytes or a request over
// MaxRequestTokens.
func (s *Server) countPairs(ctx context.Context, field string, pt pairTokens, pairs []rerank.Pair) (int, error) {
	var tokens func(int) int
	if pt != nil {
		tokens = func(i int) int { return pt.PairTokens(pairs[i]) }
	}
	return s.countTexts(ctx, field, len(pairs),
		func(i int) string { return field + "[" + strconv.Itoa(i) + "]" },
		func(i int) string { return pairs[i].Doc }, tokens)
}

// countTexts is countInputs' and countPairs' loop over n texts: each text
// (named name(i)) checked against MaxTextBytes, its tokens (tokens nil: not
// counted) summed against MaxRequestTokens (field names the request's
// excess), stopping when ctx ends.
func (s *Server) countTexts(ctx context.Context, field string, n int, name, text func(int) string, tokens func(int) int) (int, error) {
	total := 0
	for i := range n {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := s.checkText(name(i), text(i)); err != nil {
			return 0, err
		}
		if tokens == nil {
			continue
		}
		total += tokens(i)
		if total > s.lim.MaxRequestTokens {
			return 0, s.overBudget(field, total)
		}
	}
	return total, nil
}

// checkDocuments refuses a document whose title and text are over
// MaxTextBytes, and a batch whose texts come to more than
// MaxRequestTokens tokens, each document counted up to what the engine
// embeds of it (engine.DefaultMaxPassages windows). A batch of fewer bytes
// than the budget cannot be over it (a token is at least a byte) and is
// not counted.
func (s *Server) checkDocuments(ctx context.Context, docs []engine.Document) error {
	bytes := 0
	for _, d := range docs {
		if err := s.checkText("document "+clip.Quote(d.ID), d.Title+d.Text); err != nil {
			return err
		}
		bytes += len(d.Title) + len(d.Text) + 1
	}
	if bytes <= s.lim.MaxRequestTokens {
		return nil
	}
	if _, err := s.embedderFor(ctx); err != nil || s.tokens == nil {
		return err // the engine says what is wrong with the model when it embeds
	}
	per := s.tokens.maxLen * engine.DefaultMaxPassages
	if ch := s.eng.Chunking(); ch.Off {
		per = s.tokens.maxLen
	}
	total := 0
	for _, d := range docs {
		if err := ctx.Err(); err != nil {
			return err
		}
		total += s.tokens.countUpTo(engine.EmbedText(d), per)
		if total > s.lim.MaxRequestTokens {
			return s.overBudget("documents", total)
		}
	}
	return nil
}

// countUpTo counts text's tokens, at most n (reading only as much of the
// text as that takes).
func (t *tokenCounter) countUpTo(text string, n int) int {
	if t == nil || t.tok == nil {
		return 0
	}
	return len(t.tok.Encode(text, n).IDs)
}
