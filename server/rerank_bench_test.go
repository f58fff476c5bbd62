package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder/encodertest"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/bert/berttest"
	"github.com/anna-search/anna/rerank"
)

// BenchmarkRerankBatching measures /v1/rerank with a MiniLM-L6
// cross-encoder (the MiniLM weights with a random one-logit head: the
// compute of ms-marco-MiniLM-L-6-v2, not its scores): every request its
// own query with 4 documents of 24 words, 1, 8 and 32 concurrent clients,
// with the batcher on (different queries coalesced into one ScorePairs
// call) and off (BatchTexts 1: each request its own model call), for
// ANNA_BATCH_SECONDS (default 10) each: requests per second, p50, p99.
//
//	ANNA_BATCH_SECONDS=5 go test ./server -run '^$' -bench RerankBatching -benchtime 1x
func BenchmarkRerankBatching(b *testing.B) {
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "ce")
	berttest.WriteCrossEncoder(b, dir, 0)
	rr, err := rerank.Load(ctx, dir, rerank.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rr.Close()
	secs := 10
	if v, err := strconv.Atoi(os.Getenv("ANNA_BATCH_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	eng, err := engine.Open(ctx, filepath.Join(b.TempDir(), "idx"), engine.Options{Encoder: &encodertest.Hashing{D: 32, FP: "bench"}, NoShare: true})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	for range b.N {
		for _, batched := range []bool{false, true} {
			for _, clients := range []int{1, 8, 32} {
				opts := Options{Reranker: rr, RerankerName: "ce", BatchWait: 2 * time.Millisecond}
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
							k := c*100000 + i
							docs := []string{loadText(k, 24), loadText(k+1, 24), loadText(k+2, 24), loadText(k+3, 24)}
							body, _ := json.Marshal(map[string]any{"query": loadText(k, 6), "documents": docs})
							t0 := time.Now()
							resp, err := client.Post(hs.URL+"/v1/rerank", "application/json", bytes.NewReader(body))
							if err != nil || resp.StatusCode != 200 {
								b.Errorf("rerank: %v %v", err, resp)
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
