package mining

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/safe"
)

// VectorLookup returns a stored document vector by ID (the engine keeps one
// per document for its model), so indexed documents are not embedded again.
type VectorLookup func(ctx context.Context, id string) (passages [][]float32, ok bool, err error)

// DenseTeacher scores by the cosine of query and document embeddings: the
// dot product, since the encoder's vectors are L2-normalised. Positives are
// scored the same way whether or not retrieval found them.
type DenseTeacher struct {
	Enc encoder.Encoder
	// Label names the teacher in the output; default "dense:<fingerprint>".
	Label string
	// Vectors, if set, is tried first for documents with an ID; it must hold
	// vectors of Enc's model (same fingerprint).
	Vectors VectorLookup
}

func (t *DenseTeacher) Name() string {
	if t.Label != "" {
		return t.Label
	}
	fp := t.Enc.Fingerprint()
	if len(fp) > 12 {
		fp = fp[:12]
	}
	return "dense:" + fp
}

// Prompt converts the miner's query prompt to the encoder's.
func Prompt(q Query) encoder.Prompt {
	p := encoder.Prompt{Instruction: q.Instruction}
	for _, s := range q.Examples {
		p.Examples = append(p.Examples, encoder.Example{Query: s.Query, Response: s.Response})
	}
	return p
}

func (t *DenseTeacher) Score(ctx context.Context, q Query, docs []Doc) ([]float64, error) {
	ctx = safe.Ctx(ctx)
	qv, err := t.Enc.EmbedQueries(ctx, []string{q.Text}, Prompt(q))
	if err != nil {
		return nil, fmt.Errorf("embed query: %w", err)
	}
	// Each document's passages (one unless the engine split it): its score
	// is its best passage's (max-passage). Retrieval mixes in the first
	// passage for documents of 2-4 passages (dense.DocScore); the teacher
	// keeps max-passage, with which its calibration was measured.
	vecs := make([][][]float32, len(docs))
	var missing []string
	var at []int
	for i, d := range docs {
		if d.ID != "" && t.Vectors != nil {
			v, ok, err := t.Vectors(ctx, d.ID)
			if err != nil {
				return nil, fmt.Errorf("stored vector of %q: %w", d.ID, err)
			}
			if ok && len(v) > 0 {
				vecs[i] = v
				continue
			}
		}
		missing = append(missing, d.Text)
		at = append(at, i)
	}
	if len(missing) > 0 {
		vs, err := t.Enc.EmbedDocuments(ctx, missing)
		if err != nil {
			return nil, fmt.Errorf("embed documents: %w", err)
		}
		for j, v := range vs {
			vecs[at[j]] = [][]float32{v}
		}
	}
	out := make([]float64, len(docs))
	for i, passages := range vecs {
		best := math.Inf(-1)
		for _, v := range passages {
			if len(v) != len(qv[0]) {
				return nil, fmt.Errorf("document %d: vector of %d dims, query has %d", i, len(v), len(qv[0]))
			}
			var s float64
			for j := range v {
				s += float64(v[j]) * float64(qv[0][j])
			}
			best = max(best, s)
		}
		out[i] = best
	}
	return out, nil
}

// PairScorer is the cross-encoder's shape (rerank.Reranker): one logit per
// (query, document) pair.
type PairScorer interface {
	Score(ctx context.Context, query string, docs []string) ([]float32, error)
}

// CrossEncoderTeacher scores with a cross-encoder (the rerank stage). Its
// logits are often negative; the margin rule handles that (see Threshold).
// The instruction is not passed: cross-encoders read the raw query.
type CrossEncoderTeacher struct {
	R     PairScorer
	Label string // e.g. "cross-encoder:ms-marco-MiniLM-L-6-v2"
}

func (t *CrossEncoderTeacher) Name() string {
	if t.Label == "" {
		return "cross-encoder"
	}
	return t.Label
}

func (t *CrossEncoderTeacher) Score(ctx context.Context, q Query, docs []Doc) ([]float64, error) {
	ctx = safe.Ctx(ctx)
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.Text
	}
	s, err := t.R.Score(ctx, q.Text, texts)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = float64(v)
	}
	return out, nil
}

// QueryMemo wraps an encoder so that a query embedded twice in a row (by
// the dense retriever, then by the dense teacher) runs the model once. It
// keeps the last n (query, prompt) vectors in memory. Documents go to the
// wrapped encoder (typically the on-disk cache); queries may go to another
// encoder of the same model (typically the bare one: caching each mined
// query on disk would cost a synced write per query for no later use).
// Safe for concurrent use.
type QueryMemo struct {
	encoder.Encoder
	queries encoder.Encoder
	mu      sync.Mutex
	n       int
	m       map[string][]float32
	order   []string // FIFO eviction
}

// NewQueryMemo remembers up to n query vectors (n ≥ 1; a few times the
// number of workers is plenty). queries, if not nil, embeds the queries; it
// must have enc's fingerprint.
func NewQueryMemo(enc, queries encoder.Encoder, n int) (*QueryMemo, error) {
	if queries == nil {
		queries = enc
	}
	if queries.Fingerprint() != enc.Fingerprint() {
		return nil, fmt.Errorf("query memo: query encoder fingerprint %q differs from %q", queries.Fingerprint(), enc.Fingerprint())
	}
	return &QueryMemo{Encoder: enc, queries: queries, n: max(n, 1), m: map[string][]float32{}}, nil
}

// Unwrap returns the encoder the memo wraps.
func (c *QueryMemo) Unwrap() encoder.Encoder { return c.Encoder }

func memoKey(q string, p encoder.Prompt) string {
	b, _ := json.Marshal(p)
	return string(b) + "\x00" + q
}

func (c *QueryMemo) EmbedQueries(ctx context.Context, queries []string, p encoder.Prompt) ([][]float32, error) {
	ctx = safe.Ctx(ctx)
	out := make([][]float32, len(queries))
	var miss []string
	var at []int
	c.mu.Lock()
	for i, q := range queries {
		if v, ok := c.m[memoKey(q, p)]; ok {
			out[i] = v
		} else {
			miss = append(miss, q)
			at = append(at, i)
		}
	}
	c.mu.Unlock()
	if len(miss) == 0 {
		return out, nil
	}
	vs, err := c.queries.EmbedQueries(ctx, miss, p)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for j, v := range vs {
		out[at[j]] = v
		k := memoKey(miss[j], p)
		if _, ok := c.m[k]; ok {
			continue
		}
		c.m[k] = v
		c.order = append(c.order, k)
		if len(c.order) > c.n {
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
	}
	return out, nil
}
