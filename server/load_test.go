package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/encodertest"
)

var loadVocab = []string{"graph", "search", "vector", "index", "neighbour", "query", "document", "model", "tensor", "layer",
	"token", "score", "rank", "fusion", "lexical", "dense", "hybrid", "recall", "precision", "cluster", "bread", "yeast"}

func loadText(i, words int) string {
	var b bytes.Buffer
	for j := range words {
		if j > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(loadVocab[(i*7+j*13+j*j)%len(loadVocab)])
		b.WriteString(strconv.Itoa((i + j) % 50))
	}
	return b.String()
}

// loadReport is what one load run measured.
type loadReport struct {
	requests, errors int
	added            int
	p50, p99         map[string]time.Duration
	took             time.Duration
}

// runLoad indexes docs documents, then runs clients clients for d, each
// looping over search, add (a batch of 4 new documents) and embed; it then
// checks that every acknowledged document is stored.
func runLoad(t testing.TB, enc encoder.Encoder, docs, clients int, d time.Duration) loadReport {
	ctx := context.Background()
	eng, err := engine.Open(ctx, filepath.Join(t.TempDir(), "idx"), engine.Options{Encoder: enc, NoShare: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for at := 0; at < docs; at += 500 {
		var batch []engine.Document
		for i := at; i < min(docs, at+500); i++ {
			batch = append(batch, engine.Document{ID: fmt.Sprintf("d%05d", i), Title: fmt.Sprintf("document %d", i), Text: loadText(i, 30)})
		}
		if _, err := eng.Add(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := New(eng, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var (
		mu      sync.Mutex
		lat     = map[string][]time.Duration{}
		errs    atomic.Int64
		reqs    atomic.Int64
		ackedMu sync.Mutex
		acked   []string
		nextID  atomic.Int64
	)
	post := func(kind, path string, body any) bool {
		b, _ := json.Marshal(body)
		start := time.Now()
		resp, err := client.Post(hs.URL+path, "application/json", bytes.NewReader(b))
		reqs.Add(1)
		if err != nil {
			errs.Add(1)
			t.Errorf("%s: %v", kind, err)
			return false
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != 200 {
			errs.Add(1)
			t.Errorf("%s: %d %s", kind, resp.StatusCode, out)
			return false
		}
		mu.Lock()
		lat[kind] = append(lat[kind], took)
		mu.Unlock()
		return true
	}
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				switch (c + i) % 3 {
				case 0:
					post("search", "/v1/search", map[string]any{"query": loadText(c*1000+i, 4), "k": 10, "snippets": true})
				case 1:
					n := int(nextID.Add(4))
					var ds []map[string]string
					var ids []string
					for k := n - 4; k < n; k++ {
						id := fmt.Sprintf("new%06d", k)
						ids = append(ids, id)
						ds = append(ds, map[string]string{"id": id, "text": loadText(k, 25)})
					}
					if post("add", "/v1/documents", map[string]any{"documents": ds}) {
						ackedMu.Lock()
						acked = append(acked, ids...)
						ackedMu.Unlock()
					}
				case 2:
					post("embed", "/v1/embeddings", map[string]any{"input": []string{loadText(c+i, 12), loadText(c+2*i+1, 20)}})
				}
			}
		}()
	}
	wg.Wait()
	rep := loadReport{requests: int(reqs.Load()), errors: int(errs.Load()), added: len(acked), took: time.Since(start),
		p50: map[string]time.Duration{}, p99: map[string]time.Duration{}}
	var all []time.Duration
	for kind, ls := range lat {
		slices.Sort(ls)
		rep.p50[kind], rep.p99[kind] = ls[len(ls)/2], ls[len(ls)*99/100]
		all = append(all, ls...)
	}
	slices.Sort(all)
	if len(all) > 0 {
		rep.p50["all"], rep.p99["all"] = all[len(all)/2], all[len(all)*99/100]
	}
	// Nothing acknowledged is lost.
	got, err := eng.Get(ctx, acked...)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(acked) {
		t.Errorf("%d documents acknowledged, %d stored", len(acked), len(got))
	}
	st, _ := eng.Stats()
	if st.Documents != docs+len(acked) || st.DenseDocs != st.Documents || int(st.LexicalDocs) != st.Documents {
		t.Errorf("after the load: store %d, BM25 %d, dense %d documents; want %d", st.Documents, st.LexicalDocs, st.DenseDocs, docs+len(acked))
	}
	return rep
}

func (r loadReport) String() string {
	s := fmt.Sprintf("%d requests in %s (%.0f/s), %d errors, %d documents added and all stored", r.requests, r.took.Round(time.Millisecond),
		float64(r.requests)/r.took.Seconds(), r.errors, r.added)
	for _, k := range []string{"search", "add", "embed", "all"} {
		s += fmt.Sprintf("; %s p50 %.1f ms p99 %.1f ms", k, ms(r.p50[k]), ms(r.p99[k]))
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// TestLoad: 32 clients for 2 s of mixed search, add and embed against a
// 2,000-document index (the hashing encoder): no errors, nothing lost.
// BenchmarkServeLoad is the long version with the real model.
func TestLoad(t *testing.T) {
	rep := runLoad(t, &encodertest.Hashing{D: 64, FP: "load"}, 2000, 32, 2*time.Second)
	if rep.errors != 0 || rep.requests == 0 {
		t.Fatalf("load: %s", rep)
	}
	t.Logf("load: %s", rep)
}

// BenchmarkServeLoad runs the load with the default model:
// ANNA_LOAD_SECONDS (default 60) of 32 clients against 3,000 documents.
//
//	go test ./server -run '^$' -bench ServeLoad -benchtime 1x -timeout 30m
func BenchmarkServeLoad(b *testing.B) {
	enc, err := encoder.Default(context.Background())
	if err != nil {
		b.Skipf("default model: %v", err)
	}
	defer enc.Close()
	secs := 60
	if v, err := strconv.Atoi(os.Getenv("ANNA_LOAD_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	for range b.N {
		rep := runLoad(b, enc, 3000, 32, time.Duration(secs)*time.Second)
		b.Logf("32 clients, 3000 documents, %d s: %s", secs, rep)
	}
}

// BenchmarkEmbeddingsBatching measures /v1/embeddings with the default
// model: one text per request, 1, 8 and 32 concurrent clients, with the
// batcher on and off (BatchTexts 1: each request its own model call), for
// ANNA_BATCH_SECONDS (default 10) each: requests per second, p50, p99.
func BenchmarkEmbeddingsBatching(b *testing.B) {
	ctx := context.Background()
	enc, err := encoder.Default(ctx)
	if err != nil {
		b.Skipf("default model: %v", err)
	}
	defer enc.Close()
	eng, err := engine.Open(ctx, filepath.Join(b.TempDir(), "idx"), engine.Options{Encoder: enc, NoShare: true})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	batchingBench(b, eng, Options{}, "/v1/embeddings", func(k int) any {
		return map[string]any{"input": loadText(k, 16)}
	})
}

// batchingBench measures route with the batcher off (BatchTexts 1: each
// request its own model call) and on (base's other options, a 2 ms wait)
// at 1, 8 and 32 closed-loop clients for ANNA_BATCH_SECONDS (default 10)
// each, client c's i-th request posting body(c*100000+i); it logs
// requests per second, p50 and p99.
func batchingBench(b *testing.B, eng *engine.Engine, base Options, route string, body func(k int) any) {
	secs := 10
	if v, err := strconv.Atoi(os.Getenv("ANNA_BATCH_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	for range b.N {
		for _, batched := range []bool{false, true} {
			for _, clients := range []int{1, 8, 32} {
				opts := base
				opts.BatchWait = 2 * time.Millisecond
				if !batched {
					opts.BatchTexts, opts.BatchWait = 1, -1
				}
				srv, _ := New(eng, opts)
				hs := httptest.NewServer(srv)
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
				var mu sync.Mutex
				var lat []time.Duration
				deadline := time.Now().Add(time.Duration(secs) * time.Second)
				start := time.Now()
				var wg sync.WaitGroup
				for c := range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; time.Now().Before(deadline); i++ {
							raw, _ := json.Marshal(body(c*100000 + i))
							t0 := time.Now()
							resp, err := client.Post(hs.URL+route, "application/json", bytes.NewReader(raw))
							if err != nil || resp.StatusCode != 200 {
								b.Errorf("%s: %v %v", route, err, resp)
								return
							}
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							mu.Lock()
							lat = append(lat, time.Since(t0))
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				took := time.Since(start)
				hs.Close()
				srv.Close()
				slices.Sort(lat)
				b.Logf("batched=%v clients=%d: %.0f requests/s, p50 %.1f ms, p99 %.1f ms (%d requests)", batched, clients,
					float64(len(lat))/took.Seconds(), ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), len(lat))
			}
		}
	}
}
