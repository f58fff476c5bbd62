package engine

import (
	"context"
	"fmt"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/storage"
)

// embedDocs embeds docs with enc, one embedding per document: the
// document's passages (see the package doc's "Long documents") or, for a
// document that fits the model or an encoder that cannot split, one vector
// of title and text joined. Every write path (Add, Reindex, Repair) embeds
// through here.
func (e *Engine) embedDocs(ctx context.Context, enc encoder.Encoder, docs []storage.Doc) ([]storage.Embedding, error) {
	texts := make([]string, 0, len(docs))
	spans := make([][]storage.Span, len(docs))
	for i, d := range docs {
		doc := Document(d)
		texts = append(texts, EmbedText(doc))
		spans[i] = []storage.Span{{Start: 0, End: len(d.Text)}}
	}
	vecs, err := enc.EmbedDocuments(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("embedding %d documents: %w", len(docs), err)
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("the encoder returned %d vectors for %d texts", len(vecs), len(texts))
	}
	out := make([]storage.Embedding, len(docs))
	for i := range docs {
		out[i] = storage.Embedding{Vectors: vecs[i : i+1], Spans: spans[i]}
	}
	return out, nil
}
