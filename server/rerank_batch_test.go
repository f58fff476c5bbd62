package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anna-search/anna/internal/inference/inferencetest"
	"github.com/anna-search/anna/rerank"
)

// pairReranker is a rerank.PairScorer whose score of a pair is a function
// of the pair alone; it counts its calls (Score and ScorePairs alike) and
// holds the first until block is closed.
type pairReranker struct {
	block   chan struct{}
	calls   atomic.Int64
	maxJobs atomic.Int64 // most distinct queries in one call
	first   sync.Once
}

func pairScore(p rerank.Pair) float32 {
	var s float32
	for _, w := range strings.Fields(p.Query) {
		if strings.Contains(p.Doc, w) {
			s++
		}
	}
	return s - float32(len(p.Doc)%7)/10
}

func (f *pairReranker) Score(ctx context.Context, q string, docs []string) ([]float32, error) {
	ps := make([]rerank.Pair, len(docs))
	for i, d := range docs {
		ps[i] = rerank.Pair{Query: q, Doc: d}
	}
	return f.ScorePairs(ctx, ps)
}

func (f *pairReranker) ScorePairs(ctx context.Context, ps []rerank.Pair) ([]float32, error) {
	f.calls.Add(1)
	f.first.Do(func() {
		if f.block != nil {
			select {
			case <-f.block:
			case <-ctx.Done():
			}
		}
	})
	qs := map[string]bool{}
	out := make([]float32, len(ps))
	for i, p := range ps {
		qs[p.Query] = true
		out[i] = pairScore(p)
	}
	for {
		m := f.maxJobs.Load()
		if int64(len(qs)) <= m || f.maxJobs.CompareAndSwap(m, int64(len(qs))) {
			break
		}
	}
	return out, nil
}

// rerankScores posts a rerank request and returns relevance_score by
// document index.
func rerankScores(url, query string, docs []string) ([]float64, error) {
	body, _ := json.Marshal(map[string]any{"query": query, "documents": docs})
	resp, err := http.Post(url+"/v1/rerank", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out RerankResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Results) != len(docs) {
		return nil, fmt.Errorf("%q: %d %v %+v", query, resp.StatusCode, err, out)
	}
	s := make([]float64, len(docs))
	for _, r := range out.Results {
		s[r.Index] = r.RelevanceScore
	}
	return s, nil
}

// rerankCase is request i's query and documents: every request its own
// query.
func rerankCase(i int) (string, []string) {
	q := fmt.Sprintf("yeast bread number %d", i)
	return q, []string{fmt.Sprintf("bread %d with yeast", i), "graphs", fmt.Sprintf("number %d", i+1), "yeast bread number"}
}

// TestRerankBatched: concurrent /v1/rerank requests with different
// queries are answered by fewer reranker calls than requests, several
// queries in one call, each request with its own documents' scores (as
// served alone, within 1e-6).
func TestRerankBatched(t *testing.T) {
	rr := &pairReranker{block: make(chan struct{})}
	ts := newTestServer(t, Options{Reranker: rr, RerankerName: "fake", BatchWait: 20 * time.Millisecond})
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, docs := rerankCase(i)
			got, err := rerankScores(ts.url, q, docs)
			if err != nil {
				errs <- err
				return
			}
			for k, d := range docs {
				want := 1 / (1 + math.Exp(-float64(pairScore(rerank.Pair{Query: q, Doc: d}))))
				if math.Abs(got[k]-want) > 1e-6 {
					errs <- fmt.Errorf("request %d, document %d: score %v, alone %v", i, k, got[k], want)
				}
			}
		}()
	}
	// Let the requests queue behind the first (blocked) batch, then go.
	time.Sleep(200 * time.Millisecond)
	close(rr.block)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	calls := rr.calls.Load()
	if calls >= n || rr.maxJobs.Load() < 4 {
		t.Errorf("%d requests with different queries took %d reranker calls (at most %d queries in one): not coalesced", n, calls, rr.maxJobs.Load())
	}
	t.Logf("%d concurrent requests, %d queries: %d reranker calls, up to %d queries in one", n, n, calls, rr.maxJobs.Load())
}

// TestRerankBatchedModel: the same with a real cross-encoder (MiniLM with
// a random head) in the default backend: 8 concurrent requests with
// different queries take fewer model calls than requests
// and each gets the relevance scores it gets alone, within 1e-6.
func TestRerankBatchedModel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ce")
	inferencetest.WriteCrossEncoder(t, dir, 0.1)
	rr, err := rerank.Load(context.Background(), dir, rerank.Options{IntraOpThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	const n = 8
	alone := make([][]float64, n)
	{
		ts := newTestServer(t, Options{Reranker: rr, RerankerName: "ce", BatchWait: -1})
		for i := range n {
			q, docs := rerankCase(i)
			if alone[i], err = rerankScores(ts.url, q, docs); err != nil {
				t.Fatal(err)
			}
		}
	}
	cr := &countingPairs{PairScorer: rr}
	ts := newTestServer(t, Options{Reranker: cr, RerankerName: "ce", BatchWait: 500 * time.Millisecond})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, docs := rerankCase(i)
			got, err := rerankScores(ts.url, q, docs)
			if err != nil {
				errs <- err
				return
			}
			for k := range docs {
				if math.Abs(got[k]-alone[i][k]) > 1e-6 {
					errs <- fmt.Errorf("request %d, document %d: score %v coalesced, %v alone", i, k, got[k], alone[i][k])
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if calls := cr.calls.Load(); calls == 0 || calls >= n {
		t.Errorf("%d concurrent requests with different queries took %d model calls, want 1..%d", n, calls, n-1)
	}
	t.Logf("%d concurrent requests, different queries: %d model calls", n, cr.calls.Load())
}

// countingPairs counts the calls (Score and ScorePairs) that reach a
// rerank.PairScorer.
type countingPairs struct {
	rerank.PairScorer
	calls atomic.Int64
}

func (c *countingPairs) Score(ctx context.Context, q string, docs []string) ([]float32, error) {
	c.calls.Add(1)
	return c.PairScorer.Score(ctx, q, docs)
}

func (c *countingPairs) ScorePairs(ctx context.Context, ps []rerank.Pair) ([]float32, error) {
	c.calls.Add(1)
	return c.PairScorer.ScorePairs(ctx, ps)
}
