package weaviate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/filter"
	"github.com/anna-search/anna/internal/storage"
)

// ClusterConfig returns the config of the test cluster that
// scripts/weaviate.sh run started (ANNA_WEAVIATE_URLS, ANNA_WEAVIATE_API_KEY)
// with a fresh alias, dropped when tb ends; it skips tb when there is none.
func clusterConfig(tb testing.TB) Config {
	tb.Helper()
	urls := os.Getenv("ANNA_WEAVIATE_URLS")
	if urls == "" {
		tb.Skip("no Weaviate cluster (ANNA_WEAVIATE_URLS unset): `make test-cluster` builds weaviate-server v1.35.2 into $ANNA_HOME/weaviate and runs these tests against 3 nodes on loopback")
	}
	cfg := Config{URLs: strings.Split(urls, ","), APIKey: os.Getenv("ANNA_WEAVIATE_API_KEY"), Replication: 2,
		Alias: fmt.Sprintf("T%x", rand.Uint64())}
	c, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.DropAll(context.Background()); err != nil {
			tb.Errorf("dropping the test collections: %v", err)
		}
	})
	return cfg
}

func unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	for i := range v {
		v[i] /= float32(math.Sqrt(n))
	}
	return v
}

func cosine(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// TestClusterRoundTrip: documents in, searched lexically and densely with
// and without filters (checked against brute force), updated to fewer
// passages, deleted, counted; the alias moved to a second generation.
func TestClusterRoundTrip(t *testing.T) {
	cfg := clusterConfig(t)
	ctx := context.Background()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	co, err := c.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Point(ctx, co); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := c.Resolve(ctx); err != nil || !ok || got.Name() != co.Name() {
		t.Fatalf("Resolve = %v, %v, %v; want %s", got, ok, err, co.Name())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const n, dim = 60, 16
	langs := []string{"en", "de", "fr"}
	var docs []storage.Doc
	var embs []storage.Embedding
	for i := range n {
		d := storage.Doc{ID: fmt.Sprintf("doc-%02d", i), Title: fmt.Sprintf("title %d", i),
			Text: fmt.Sprintf("body of document number%d with word%d", i, i%7),
			Meta: map[string]string{"lang": langs[i%3], "path": fmt.Sprintf("dir%d/file%d", i%4, i)}}
		passages := 1 + i%3
		var e storage.Embedding
		for range passages {
			v := make([]float32, dim)
			for k := range v {
				v[k] = float32(rng.NormFloat64())
			}
			e.Vectors = append(e.Vectors, unit(v))
			e.Spans = append(e.Spans, storage.Span{})
		}
		docs, embs = append(docs, d), append(embs, e)
	}
	if err := co.Upsert(ctx, docs, embs); err != nil {
		t.Fatal(err)
	}
	if err := co.SetState(ctx, State{StoreID: "s", Seq: 7, VectorKey: "k"}); err != nil {
		t.Fatal(err)
	}
	if st, ok, err := co.State(ctx); err != nil || !ok || st != (State{StoreID: "s", Seq: 7, VectorKey: "k"}) {
		t.Fatalf("State = %+v, %v, %v", st, ok, err)
	}
	nd, np, err := co.Count(ctx)
	if err != nil || nd != n || np != n+n/3+2*n/3 {
		t.Fatalf("Count = %d docs, %d passages, %v; want %d, %d", nd, np, err, n, n+n/3+2*n/3)
	}

	// Dense, against brute force over best passages, with filters.
	filters := []filter.Filter{{}, filter.Eq("lang", "de"), filter.In("lang", "en", "fr"), filter.Prefix("path", "dir1/"),
		filter.Not(filter.Eq("lang", "en")), filter.Or(filter.Eq("lang", "de"), filter.And(filter.Eq("lang", "en"), filter.Prefix("path", "dir0/")))}
	for _, f := range filters {
		q := make([]float32, dim)
		for k := range q {
			q[k] = float32(rng.NormFloat64())
		}
		unit(q)
		type scored struct {
			id string
			s  float64
		}
		var want []scored
		for i, d := range docs {
			if !f.Match(d.Meta) {
				continue
			}
			best := -2.0
			for _, v := range embs[i].Vectors {
				best = max(best, cosine(q, v))
			}
			want = append(want, scored{d.ID, best})
		}
		sort.Slice(want, func(a, b int) bool { return want[a].s > want[b].s })
		want = want[:min(10, len(want))]
		got, err := co.Dense(ctx, q, 10, f)
		if err != nil {
			t.Fatalf("Dense(%v): %v", f, err)
		}
		if len(got) != len(want) {
			t.Fatalf("Dense(%v): %d hits, want %d", f, len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i].id || math.Abs(got[i].Score-want[i].s) > 1e-5 {
				t.Errorf("Dense(%v) #%d = %s %.6f, want %s %.6f", f, i, got[i].ID, got[i].Score, want[i].id, want[i].s)
			}
		}
		// Lexical: "body" is in every document; the filter decides which.
		lex, err := co.Lexical(ctx, "body", n, f)
		if err != nil {
			t.Fatalf("Lexical(%v): %v", f, err)
		}
		var wantIDs, gotIDs []string
		for _, d := range docs {
			if f.Match(d.Meta) {
				wantIDs = append(wantIDs, d.ID)
			}
		}
		for _, h := range lex {
			gotIDs = append(gotIDs, h.ID)
		}
		slices.Sort(gotIDs)
		if !slices.Equal(gotIDs, wantIDs) {
			t.Errorf("Lexical(body, %v) = %v, want %v", f, gotIDs, wantIDs)
		}
	}
	lex, err := co.Lexical(ctx, "number17", 5, filter.Filter{})
	if err != nil || len(lex) != 1 || lex[0].ID != "doc-17" {
		t.Fatalf("Lexical(number17) = %v, %v", lex, err)
	}

	// An update to one passage removes the others; a delete removes all.
	upd := docs[2] // 3 passages
	upd.Text = "rewritten"
	if err := co.Upsert(ctx, []storage.Doc{upd}, []storage.Embedding{{Vectors: embs[2].Vectors[:1], Spans: embs[2].Spans[:1]}}); err != nil {
		t.Fatal(err)
	}
	if err := co.Delete(ctx, []string{"doc-00", "doc-01", "absent"}); err != nil {
		t.Fatal(err)
	}
	nd, np, err = co.Count(ctx)
	if wantP := n + n/3 + 2*n/3 - 2 - 1 - 2; err != nil || nd != n-2 || np != wantP {
		t.Fatalf("after update and delete: Count = %d, %d, %v; want %d, %d", nd, np, err, n-2, wantP)
	}
	ids, err := co.IDs(ctx)
	if err != nil || len(ids) != n-2 || ids[0] != "doc-02" {
		t.Fatalf("IDs = %d ids (first %v), %v", len(ids), ids[:min(1, len(ids))], err)
	}
	if lex, err := co.Lexical(ctx, "rewritten", 5, filter.Filter{}); err != nil || len(lex) != 1 || lex[0].ID != "doc-02" {
		t.Fatalf("Lexical(rewritten) = %v, %v", lex, err)
	}

	// A second generation; the alias moves to it.
	g2, err := c.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g2.Name() == co.Name() {
		t.Fatalf("second generation named like the first: %s", g2.Name())
	}
	if err := c.Point(ctx, g2); err != nil {
		t.Fatal(err)
	}
	if got, _, err := c.Resolve(ctx); err != nil || got.Name() != g2.Name() {
		t.Fatalf("after Point, Resolve = %v, %v; want %s", got, err, g2.Name())
	}
	gens, err := c.Generations(ctx)
	if err != nil || len(gens) != 2 {
		t.Fatalf("Generations = %v, %v", gens, err)
	}
}

// TestClusterRefusesWithoutKey: anonymous access is off; a request with no
// key or a wrong one is refused with ErrUnauthorized, and names the URL.
func TestClusterRefusesWithoutKey(t *testing.T) {
	cfg := clusterConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	good, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	co, err := good.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"", "not-the-key"} {
		bad := cfg
		bad.URLs, bad.APIKey = append([]string(nil), cfg.URLs...), key
		c, err := New(bad)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Generations(ctx)
		if !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("key %q: listing collections: err = %v, want ErrUnauthorized", key, err)
		}
		if !strings.Contains(err.Error(), cfg.URLs[0]) {
			t.Errorf("error does not name the URL: %v", err)
		}
		_, err = c.Collection(co.Name()).Lexical(ctx, "anything", 5, filter.Filter{})
		if !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("key %q: bm25 search: err = %v, want ErrUnauthorized", key, err)
		}
		err = c.Collection(co.Name()).Upsert(ctx, []storage.Doc{{ID: "x", Text: "y"}}, []storage.Embedding{{Vectors: [][]float32{unit([]float32{1, 2})}}})
		if !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("key %q: upsert: err = %v, want ErrUnauthorized", key, err)
		}
		t.Logf("key %q refused: %v", key, err)
	}
	if n, _, err := co.Count(ctx); err != nil || n != 0 {
		t.Fatalf("refused writes left %d documents (%v)", n, err)
	}
}
