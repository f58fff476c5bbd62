package lexical

import (
	"context"
	"fmt"
	"math"

	"github.com/anna-search/anna/internal/safe"
)

// Coverage is how much of query the index can match: for each language the
// index holds, the share of the query's terms (as that language's analyzer
// reads them) that some document of the language holds, each term weighted
// by its BM25 idf (an absent term by the idf of a term no document holds),
// and the best language's share. 1 is a query all of whose words the index
// knows; near 0, a query in a language the index does not hold (a Chinese
// question over English paragraphs shares at most its names and numbers
// with them), whose BM25 list then ranks by a word or two. A query with no
// term at all (only stop words) covers 0. The engine weighs the BM25 list
// in hybrid search by it.
func (ix *Index) Coverage(ctx context.Context, query string) (float64, error) {
	ctx = safe.Ctx(ctx)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	snap, reader, err := ix.openSnapshot()
	if err != nil {
		return 0, fmt.Errorf("lexical: coverage: %w", err)
	}
	defer reader.Close()
	st, err := readStats(reader)
	if err != nil {
		return 0, fmt.Errorf("lexical: coverage: %w", err)
	}
	terms, err := queryTerms(query, st, snap.live)
	if err != nil {
		return 0, fmt.Errorf("lexical: coverage: %w", err)
	}
	type share struct{ found, all float64 }
	by := map[string]*share{}
	for _, qt := range terms {
		var df uint64
		for _, field := range fields {
			var fdf uint64
			for _, ss := range snap.segs {
				d, err := ss.Segment().Dictionary(field)
				if err != nil {
					return 0, fmt.Errorf("lexical: coverage: field %s dictionary: %w", field, err)
				}
				pl, err := d.PostingsList([]byte(qt.term), ss.Deleted(), nil)
				if err != nil {
					return 0, fmt.Errorf("lexical: coverage: postings of %q: %w", qt.term, err)
				}
				fdf += pl.Count()
			}
			df = max(df, fdf)
		}
		n := float64(max(qt.docs, df, 1))
		idf := qt.qtf * math.Log(1+(n-float64(df)+0.5)/(float64(df)+0.5))
		s := by[qt.lang]
		if s == nil {
			s = &share{}
			by[qt.lang] = s
		}
		s.all += idf
		if df > 0 {
			s.found += idf
		}
	}
	best := 0.0
	for _, s := range by {
		if s.all > 0 {
			best = max(best, s.found/s.all)
		}
	}
	return best, nil
}
