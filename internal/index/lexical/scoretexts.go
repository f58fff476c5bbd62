package lexical

import (
	"context"
	"fmt"
	"math"

	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/storage"
	"github.com/anna-search/anna/lang"
)

// Fields is a document's title and text, the two fields the index scores,
// and its language ("": as Index would choose it for a document naming none).
type Fields struct{ Title, Text, Language string }

// ScoreTexts returns the BM25 score of query against each of docs, computed
// as Search scores an indexed document — the same analyzer, K1, B, idf and
// best_fields combination, with the index's statistics (live documents,
// document frequencies, average field lengths) — but with each document's
// own term counts and field lengths, so any text gets a score whether or not
// it is indexed. For a document indexed with these fields the score is the
// one Search gives it (up to float rounding); for any other text it is the
// score it would get were it added without changing the statistics. A
// document sharing no term with the query scores 0, as does every document
// of an empty index.
//
// Mining uses it as the lexical half of a teacher that must score any
// (query, document) pair, retrieved or not.
func (ix *Index) ScoreTexts(ctx context.Context, query string, docs []Fields) ([]float64, error) {
	ctx = safe.Ctx(ctx)
	out := make([]float64, len(docs))
	if len(docs) == 0 {
		return out, nil
	}
	snap, reader, err := ix.openSnapshot()
	if err != nil {
		return nil, fmt.Errorf("lexical: score texts: %w", err)
	}
	defer reader.Close()
	st, err := readStats(reader)
	if err != nil {
		return nil, fmt.Errorf("lexical: score texts: %w", err)
	}
	terms, err := queryTerms(query, st, snap.live)
	if err != nil {
		return nil, fmt.Errorf("lexical: score texts: %w", err)
	}
	if len(terms) == 0 {
		return out, nil
	}
	if snap.live == 0 {
		return out, nil
	}
	N := float64(snap.live)
	// w[f][j]: qtf·idf·(K1+1) of query term j in field f (0 when the
	// term is in no document's field f); kl[f]: K1·B/avgdl.
	var w [len(fields)][]float64
	var kl [len(fields)]float64
	for f, field := range fields {
		w[f] = make([]float64, len(terms))
		avgdl := float64(st.Len[f]) / N
		if avgdl == 0 {
			continue
		}
		kl[f] = K1 * B / avgdl
		for _, ss := range snap.segs {
			d, err := ss.Segment().Dictionary(field)
			if err != nil {
				return nil, fmt.Errorf("lexical: score texts: field %s dictionary: %w", field, err)
			}
			for j, qt := range terms {
				pl, err := d.PostingsList([]byte(qt.term), ss.Deleted(), nil)
				if err != nil {
					return nil, fmt.Errorf("lexical: score texts: postings of %q in %s: %w", qt.term, field, err)
				}
				w[f][j] += float64(pl.Count()) // df for now
			}
		}
		for j, qt := range terms {
			if df := w[f][j]; df > 0 {
				n := N
				if qt.docs > 0 {
					n = max(float64(qt.docs), df)
				}
				w[f][j] = qt.qtf * math.Log(1+(n-df+0.5)/(df+0.5)) * (K1 + 1)
			}
		}
	}
	in := make([]storage.Doc, len(docs))
	for i, d := range docs {
		in[i] = storage.Doc{Title: d.Title, Text: d.Text, Language: d.Language}
	}
	langs, err := ix.docLanguages(ctx, in, st.Langs)
	if err != nil {
		return nil, fmt.Errorf("lexical: score texts: %w", err)
	}
	index := make(map[string]int, len(terms))
	for j, qt := range terms {
		index[qt.term] = j
	}
	tf := make([]float64, len(terms))
	for i, d := range docs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var fs fieldScores
		dl := langs[i]
		a, err := lang.Analyzer(dl)
		if err != nil {
			return nil, fmt.Errorf("lexical: score texts: %w", err)
		}
		prefix := termPrefix(dl)
		for f, text := range [len(fields)]string{d.Title, d.Text} {
			if text == "" || kl[f] == 0 {
				continue
			}
			toks := a.Analyze([]byte(text))
			clear(tf)
			for _, t := range toks {
				if j, ok := index[prefix+string(t.Term)]; ok {
					tf[j]++
				}
			}
			dl := float64(len(toks))
			for j, n := range tf {
				if n > 0 && w[f][j] > 0 {
					fs[f] += w[f][j] * n / (n + K1*(1-B) + kl[f]*dl)
				}
			}
		}
		out[i] = combine(&fs)
	}
	return out, nil
}
