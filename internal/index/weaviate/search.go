package weaviate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/safe"
)

// Hit is one document found by a search: its best passage's score (and,
// for a dense search, which passage that is).
type Hit struct {
	ID      string
	Score   float64
	Passage int
}

// where is Weaviate's filter, written as JSON for REST and as an input
// object for GraphQL.
type where struct {
	Operator       string   `json:"operator"`
	Path           []string `json:"path,omitempty"`
	Operands       []where  `json:"operands,omitempty"`
	ValueText      *string  `json:"valueText,omitempty"`
	ValueTextArray []string `json:"valueTextArray,omitempty"`
	ValueInt       *int     `json:"valueInt,omitempty"`
}

func (w where) graphQL(b *strings.Builder) {
	fmt.Fprintf(b, "{operator: %s", w.Operator)
	if len(w.Path) > 0 {
		b.WriteString(", path: ")
		b.WriteString(gqlString(w.Path))
	}
	if w.ValueText != nil {
		b.WriteString(", valueText: ")
		b.WriteString(gqlString(*w.ValueText))
	}
	if w.ValueTextArray != nil { // GraphQL's valueText takes a list too
		b.WriteString(", valueText: ")
		b.WriteString(gqlString(w.ValueTextArray))
	}
	if w.ValueInt != nil {
		fmt.Fprintf(b, ", valueInt: %d", *w.ValueInt)
	}
	if len(w.Operands) > 0 {
		b.WriteString(", operands: [")
		for i, o := range w.Operands {
			if i > 0 {
				b.WriteString(", ")
			}
			o.graphQL(b)
		}
		b.WriteString("]")
	}
	b.WriteString("}")
}

// gqlString writes a string or a list of strings as a GraphQL literal
// (JSON's escapes are GraphQL's).
func gqlString(v any) string {
	raw, _ := marshal(v)
	return string(raw)
}

// ErrUnsupportedFilter is what a filter the Weaviate backend cannot run
// wraps: ranges (Gt, Gte, Lt, Lte, Range) and typed (number or list)
// metadata values, which it does not index.
var ErrUnsupportedFilter = errors.New("not supported by the Weaviate backend")

// fromFilter translates one of anna's filters to a Weaviate where clause
// on the meta property, through its JSON form (package filter's
// documented language). The zero Filter gives ok false: no clause.
func fromFilter(f filter.Filter) (w where, ok bool, err error) {
	if f.IsZero() {
		return where{}, false, nil
	}
	raw, err := f.MarshalJSON()
	if err != nil {
		return where{}, false, err
	}
	var node map[string]json.RawMessage
	if err := json.Unmarshal(raw, &node); err != nil {
		return where{}, false, err
	}
	w, err = fromNode(node, "$")
	return w, err == nil, err
}

func fromNode(node map[string]json.RawMessage, path string) (where, error) {
	var parts []where
	for key, val := range node {
		switch key {
		case "and", "or":
			var subs []map[string]json.RawMessage
			if err := json.Unmarshal(val, &subs); err != nil {
				return where{}, fmt.Errorf("filter %s.%s: %w", path, key, err)
			}
			w := where{Operator: map[string]string{"and": "And", "or": "Or"}[key]}
			for i, s := range subs {
				sw, err := fromNode(s, fmt.Sprintf("%s.%s[%d]", path, key, i))
				if err != nil {
					return where{}, err
				}
				w.Operands = append(w.Operands, sw)
			}
			if len(w.Operands) == 1 {
				w = w.Operands[0]
			} else if len(w.Operands) == 0 { // And() matches every document
				w = where{Operator: "GreaterThanEqual", Path: []string{"passage"}, ValueInt: new(int)}
			}
			parts = append(parts, w)
		case "not":
			var sub map[string]json.RawMessage
			if err := json.Unmarshal(val, &sub); err != nil {
				return where{}, fmt.Errorf("filter %s.not: %w", path, err)
			}
			sw, err := fromNode(sub, path+".not")
			if err != nil {
				return where{}, err
			}
			parts = append(parts, where{Operator: "Not", Operands: []where{sw}})
		case "in":
			var m map[string][]string
			if err := json.Unmarshal(val, &m); err != nil {
				return where{}, fmt.Errorf("filter %s.in: %w: %w (the Weaviate backend indexes string metadata only)", path, ErrUnsupportedFilter, err)
			}
			for k, vs := range m {
				if err := checkMetaKey(k, path+".in"); err != nil {
					return where{}, err
				}
				terms := make([]string, len(vs))
				for i, v := range vs {
					terms[i] = k + MetaSeparator + v
				}
				parts = append(parts, where{Operator: "ContainsAny", Path: []string{"meta"}, ValueTextArray: terms})
			}
		case "eq":
			var m map[string]string
			if err := json.Unmarshal(val, &m); err != nil {
				return where{}, fmt.Errorf("filter %s.eq: %w: %w (the Weaviate backend indexes string metadata only)", path, ErrUnsupportedFilter, err)
			}
			for k, v := range m {
				if err := checkMetaKey(k, path+".eq"); err != nil {
					return where{}, err
				}
				term := k + MetaSeparator + v
				parts = append(parts, where{Operator: "Equal", Path: []string{"meta"}, ValueText: &term})
			}
		case "prefix":
			var m map[string]string
			if err := json.Unmarshal(val, &m); err != nil {
				return where{}, fmt.Errorf("filter %s.prefix: %w", path, err)
			}
			for k, v := range m {
				if err := checkMetaKey(k, path+".prefix"); err != nil {
					return where{}, err
				}
				if strings.ContainsAny(v, "*?") {
					return where{}, fmt.Errorf("filter %s.prefix.%s: %q holds * or ?, which Weaviate's Like reads as wildcards: not supported by the Weaviate backend", path, k, v)
				}
				pat := k + MetaSeparator + v + "*"
				parts = append(parts, where{Operator: "Like", Path: []string{"meta"}, ValueText: &pat})
			}
		case "gt", "gte", "lt", "lte", "range":
			return where{}, fmt.Errorf("filter %s.%s: %w: ranges are not supported by the Weaviate backend (its meta property holds key-value strings); search the directory's own indexes", path, key, ErrUnsupportedFilter)
		default: // {"key": "value"}: Eq
			var v string
			if err := json.Unmarshal(val, &v); err != nil {
				if len(val) > 0 && val[0] != '"' {
					return where{}, fmt.Errorf("filter %s.%s: %w: the value %s is not a string, and the Weaviate backend indexes string metadata only", path, key, ErrUnsupportedFilter, val)
				}
				return where{}, fmt.Errorf("filter %s.%s: %w", path, key, err)
			}
			if err := checkMetaKey(key, path); err != nil {
				return where{}, err
			}
			term := key + MetaSeparator + v
			parts = append(parts, where{Operator: "Equal", Path: []string{"meta"}, ValueText: &term})
		}
	}
	switch len(parts) {
	case 0:
		return where{Operator: "GreaterThanEqual", Path: []string{"passage"}, ValueInt: new(int)}, nil
	case 1:
		return parts[0], nil
	}
	return and(parts...), nil
}

func checkMetaKey(k, path string) error {
	if strings.Contains(k, MetaSeparator) {
		return fmt.Errorf("filter %s: key %q holds \\x1f, which the Weaviate backend uses to join keys and values", path, k)
	}
	return nil
}

// graphQL runs a GraphQL query and decodes data.Get.<collection> into out.
func (co *Collection) graphQL(ctx context.Context, op, query string, out any) error {
	var res struct {
		Data   map[string]map[string]json.RawMessage `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := co.c.do(ctx, op, co.name, http.MethodPost, "/v1/graphql", map[string]string{"query": query}, &res); err != nil {
		return err
	}
	if len(res.Errors) > 0 {
		msgs := make([]string, len(res.Errors))
		for i, e := range res.Errors {
			msgs[i] = e.Message
		}
		return &Error{URL: co.c.cfg.URLs[0] + "/v1/graphql", Collection: co.name, Op: op, Msg: strings.Join(msgs, "; "), Err: errGraphQL}
	}
	for _, byClass := range res.Data {
		if raw, ok := byClass[co.name]; ok {
			return json.Unmarshal(raw, out)
		}
	}
	return &Error{URL: co.c.cfg.URLs[0] + "/v1/graphql", Collection: co.name, Op: op, Msg: "no result for the collection", Err: errGraphQL}
}

var errGraphQL = fmt.Errorf("GraphQL error")

type gqlHit struct {
	DocID      string `json:"docId"`
	Passage    int    `json:"passage"`
	Additional struct {
		Score    string   `json:"score"`
		Distance *float64 `json:"distance"`
	} `json:"_additional"`
}

// args are the GraphQL arguments every Get sends: the read consistency
// and the where clause (a filter.Filter, or a where).
func (co *Collection) args(f any) (string, error) {
	var w where
	ok := true
	switch f := f.(type) {
	case filter.Filter:
		var err error
		if w, ok, err = fromFilter(f); err != nil {
			return "", err
		}
	case where:
		w = f
	}
	s := ""
	if co.c.cfg.Replication > 1 {
		// GraphQL takes the argument only on replicated collections.
		s = ", consistencyLevel: " + co.c.cfg.ReadConsistency
	}
	if ok {
		var b strings.Builder
		w.graphQL(&b)
		s += ", where: " + b.String()
	}
	return s, nil
}

// Lexical returns the k best documents for query by Weaviate's BM25 over
// title and text, restricted to those f matches.
func (co *Collection) Lexical(ctx context.Context, query string, k int, f filter.Filter) ([]Hit, error) {
	ctx = safe.Ctx(ctx)
	if k <= 0 {
		return nil, nil
	}
	args, err := co.args(f)
	if err != nil {
		return nil, err
	}
	q := fmt.Sprintf(`{Get{%s(bm25: {query: %s, properties: ["title", "text"]}, limit: %d%s){docId passage _additional{score}}}}`,
		co.name, gqlString(query), k, args)
	var hits []gqlHit
	if err := co.graphQL(ctx, "bm25 search", q, &hits); err != nil {
		return nil, err
	}
	out := make([]Hit, 0, len(hits))
	for _, h := range hits {
		s, err := strconv.ParseFloat(h.Additional.Score, 64)
		if err != nil {
			return nil, fmt.Errorf("weaviate: bm25 search on %s: score %q: %w", co.name, h.Additional.Score, err)
		}
		out = append(out, Hit{ID: h.DocID, Score: s})
	}
	return out, nil
}

// Dense returns the k documents whose best passage is nearest to vec
// (cosine), restricted to those f matches. It asks for more passages
// while documents repeat and the collection has more.
func (co *Collection) Dense(ctx context.Context, vec []float32, k int, f filter.Filter) ([]Hit, error) {
	ctx = safe.Ctx(ctx)
	if k <= 0 {
		return nil, nil
	}
	args, err := co.args(f)
	if err != nil {
		return nil, err
	}
	vecs := vectorLiteral(vec)
	return co.distinctHits(ctx, "near-vector search", k, func(limit int) string {
		return fmt.Sprintf(`{Get{%s(nearVector: {vector: [%s]}, limit: %d%s){docId passage _additional{distance}}}}`,
			co.name, vecs, limit, args)
	}, func(h gqlHit) (float64, error) {
		if h.Additional.Distance == nil {
			return 0, fmt.Errorf("weaviate: near-vector search on %s: no distance for %q", co.name, h.DocID)
		}
		return 1 - *h.Additional.Distance, nil
	})
}

// vectorLiteral is vec as the comma-separated numbers of a GraphQL list.
func vectorLiteral(vec []float32) string {
	var vb strings.Builder
	for i, x := range vec {
		if i > 0 {
			vb.WriteByte(',')
		}
		vb.WriteString(strconv.FormatFloat(float64(x), 'g', -1, 32))
	}
	return vb.String()
}

// distinctHits runs a Get query, built by query for a limit, until it gives
// k distinct documents, each at its first (best) passage: the limit starts
// a little above k and doubles while the collection has more objects.
// score reads a hit's score.
func (co *Collection) distinctHits(ctx context.Context, op string, k int, query func(limit int) string, score func(gqlHit) (float64, error)) ([]Hit, error) {
	limit := k + k/4 + 4
	for {
		var hits []gqlHit
		if err := co.graphQL(ctx, op, query(limit), &hits); err != nil {
			return nil, err
		}
		seen := make(map[string]bool, len(hits))
		out := make([]Hit, 0, k)
		for _, h := range hits {
			if seen[h.DocID] {
				continue
			}
			seen[h.DocID] = true
			sc, err := score(h)
			if err != nil {
				return nil, err
			}
			out = append(out, Hit{ID: h.DocID, Score: sc, Passage: h.Passage})
			if len(out) == k {
				return out, nil
			}
		}
		if len(hits) < limit {
			return out, nil // the collection has no more
		}
		limit *= 2
	}
}

// Count returns the number of documents and of passages in the collection.
func (co *Collection) Count(ctx context.Context) (docs, passages int, err error) {
	ctx = safe.Ctx(ctx)
	count := func(w where) (int, error) {
		var b strings.Builder
		w.graphQL(&b)
		q := fmt.Sprintf(`{Aggregate{%s(where: %s){meta{count}}}}`, co.name, b.String())
		var res []struct {
			Meta struct {
				Count int `json:"count"`
			} `json:"meta"`
		}
		if err := co.graphQL(ctx, "counting objects", q, &res); err != nil {
			return 0, err
		}
		if len(res) != 1 {
			return 0, fmt.Errorf("weaviate: counting objects of %s: %d results", co.name, len(res))
		}
		return res[0].Meta.Count, nil
	}
	zero := 0
	if docs, err = count(where{Operator: "Equal", Path: []string{"passage"}, ValueInt: &zero}); err != nil {
		return 0, 0, err
	}
	if passages, err = count(where{Operator: "GreaterThanEqual", Path: []string{"passage"}, ValueInt: &zero}); err != nil {
		return 0, 0, err
	}
	return docs, passages, nil
}

// ScoreIDs returns the BM25 score of query against each of the documents
// ids that the collection holds and that match a query term (the others
// are absent from the map).
func (co *Collection) ScoreIDs(ctx context.Context, query string, ids []string) (map[string]float64, error) {
	ctx = safe.Ctx(ctx)
	out := make(map[string]float64, len(ids))
	for start := 0; start < len(ids); start += batchSize {
		part := ids[start:min(start+batchSize, len(ids))]
		args, err := co.args(docIn(part))
		if err != nil {
			return nil, err
		}
		q := fmt.Sprintf(`{Get{%s(bm25: {query: %s, properties: ["title", "text"]}, limit: %d%s){docId passage _additional{score}}}}`,
			co.name, gqlString(query), len(part), args)
		var hits []gqlHit
		if err := co.graphQL(ctx, "bm25 scores of given documents", q, &hits); err != nil {
			return nil, err
		}
		for _, h := range hits {
			s, err := strconv.ParseFloat(h.Additional.Score, 64)
			if err != nil {
				return nil, fmt.Errorf("weaviate: bm25 scores on %s: score %q: %w", co.name, h.Additional.Score, err)
			}
			out[h.DocID] = s
		}
	}
	return out, nil
}

// Hybrid is Weaviate's own hybrid search (BM25 and the near-vector search
// of vec fused by Weaviate, fusion "rankedFusion" or "relativeScoreFusion",
// alpha the dense weight), documents ranked by their best passage. The
// engine fuses the two lists itself; this is here to measure the two
// against each other.
func (co *Collection) Hybrid(ctx context.Context, query string, vec []float32, k int, alpha float64, fusion string, f filter.Filter) ([]Hit, error) {
	ctx = safe.Ctx(ctx)
	args, err := co.args(f)
	if err != nil {
		return nil, err
	}
	vecs := vectorLiteral(vec)
	return co.distinctHits(ctx, "hybrid search", k, func(limit int) string {
		return fmt.Sprintf(`{Get{%s(hybrid: {query: %s, vector: [%s], alpha: %g, fusionType: %s, properties: ["title", "text"]}, limit: %d%s){docId passage _additional{score}}}}`,
			co.name, gqlString(query), vecs, alpha, fusion, limit, args)
	}, func(h gqlHit) (float64, error) {
		s, _ := strconv.ParseFloat(h.Additional.Score, 64)
		return s, nil
	})
}
