package engine

import (
	"context"

	"github.com/anna-search/anna/internal/safe"
)

// LexicalScores returns the BM25 score of query against each document:
// the score the lexical list gives an indexed document with that title and
// text, computed with the index's statistics for any document, indexed or
// not (0 when no query term occurs in it). Mining's teacher uses it to
// score positives that retrieval did not find.
//
// On the Weaviate backend only documents the collection holds can be
// scored, and they are named by ID (Document.ID; title and text are not
// read): Weaviate's BM25 restricted to those IDs. A document without an ID
// is refused with ErrUnsupported.
func (t Teacher) LexicalScores(ctx context.Context, query string, docs []Document) (_ []float64, err error) {
	e := t.e
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if e.via != nil {
		return e.via.lexicalScores(ctx, query, docs)
	}
	if r, ok := e.be.(*remote); ok {
		return r.lexicalScores(ctx, query, docs)
	}
	return e.local().lexicalScores(ctx, query, docs)
}
