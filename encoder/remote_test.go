package encoder_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
)

// fakeEmbeddings answers OpenAI's /v1/embeddings with vectors made from
// each text (its length and first byte, unnormalised), in reverse order of
// index (clients must order them), recording the batches it got; fail,
// when set, answers instead.
type fakeEmbeddings struct {
	mu                    sync.Mutex
	batches               [][]string
	keys                  []string
	inFlight, maxInFlight atomic.Int64
	fail                  func(n int) (status int, body string, header map[string]string) // n: requests so far
	delay                 time.Duration
}

func (f *fakeEmbeddings) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cur := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxInFlight.Load()
		if cur <= m || f.maxInFlight.CompareAndSwap(m, cur) {
			break
		}
	}
	var req struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	f.batches = append(f.batches, req.Input)
	f.keys = append(f.keys, r.Header.Get("Authorization"))
	n := len(f.batches)
	f.mu.Unlock()
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-r.Context().Done():
			return
		}
	}
	if f.fail != nil {
		if status, body, h := f.fail(n); status != 0 {
			for k, v := range h {
				w.Header().Set(k, v)
			}
			w.WriteHeader(status)
			fmt.Fprint(w, body)
			return
		}
	}
	type item struct {
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	var data []item
	for i := len(req.Input) - 1; i >= 0; i-- {
		data = append(data, item{i, fakeVec(req.Input[i])})
	}
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
}

func fakeVec(s string) []float64 { return []float64{float64(len(s)), float64(s[0]), 2} }

func unit(v []float64) []float32 {
	var n float64
	for _, x := range v {
		n += x * x
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x / math.Sqrt(n))
	}
	return out
}

func TestParseRemote(t *testing.T) {
	for _, c := range []struct{ spec, url, name, err string }{
		{"http://127.0.0.1:8080/v1#bge", "http://127.0.0.1:8080/v1/embeddings", "bge", ""},
		{"http://127.0.0.1:8080/v1/#bge", "http://127.0.0.1:8080/v1/embeddings", "bge", ""},
		{"http://h:11434#nomic-embed-text:latest", "http://h:11434/v1/embeddings", "nomic-embed-text:latest", ""},
		{"https://api.example.com/v1/embeddings#m", "https://api.example.com/v1/embeddings", "m", ""},
		{"http://h/v1", "", "", "URL#NAME"},
		{"http://h/v1#", "", "", "URL#NAME"},
		{"http://user:pw@h/v1#m", "", "", "ANNA_MODEL_API_KEY"},
		{"ftp://h/v1#m", "", "", "not an http"},
	} {
		u, n, err := encoder.ParseRemote(c.spec)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error naming %s", c.spec, err, c.err)
			}
			continue
		}
		if err != nil || u != c.url || n != c.name {
			t.Errorf("%s: %q %q %v, want %q %q", c.spec, u, n, err, c.url, c.name)
		}
	}
}

// TestRemoteEncoder: batches of Batch texts, Parallel at a time, put back
// in order and normalised; the key sent; the fingerprint of name and
// dimension; retries of what may pass (Retry-After honoured), none of a
// refusal, whose message is named; cancellation within a request.
func TestRemoteEncoder(t *testing.T) {
	f := &fakeEmbeddings{delay: 20 * time.Millisecond}
	hs := httptest.NewServer(f)
	defer hs.Close()
	ctx := context.Background()
	r, err := encoder.OpenRemote(ctx, hs.URL+"/v1#fake-model", encoder.RemoteOptions{APIKey: "k", Batch: 3, Parallel: 2, Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Dim() != 3 || r.Fingerprint() != encoder.RemoteFingerprint("fake-model", 3) || r.Manifest().Name != "fake-model" {
		t.Fatalf("dim %d, fingerprint %s, name %q", r.Dim(), r.Fingerprint(), r.Manifest().Name)
	}
	if encoder.RemoteFingerprint("fake-model", 3) == encoder.RemoteFingerprint("fake-model", 4) || encoder.RemoteFingerprint("a", 3) == encoder.RemoteFingerprint("b", 3) {
		t.Fatal("fingerprints do not tell name and dimension apart")
	}
	var texts []string
	for i := range 10 {
		texts = append(texts, strings.Repeat(string(rune('a'+i)), i+1))
	}
	got, err := r.EmbedDocuments(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		want := unit(fakeVec(texts[i]))
		for k := range v {
			if math.Abs(float64(v[k]-want[k])) > 1e-6 {
				t.Fatalf("vector %d = %v, want %v", i, v, want)
			}
		}
	}
	f.mu.Lock()
	if len(f.batches) != 1+4 || len(f.batches[1]) != 3 || f.keys[1] != "Bearer k" {
		t.Errorf("batches %v, keys %v: want the probe and 4 batches of at most 3, with the key", f.batches, f.keys)
	}
	f.mu.Unlock()
	if m := f.maxInFlight.Load(); m != 2 {
		t.Errorf("%d requests in flight at most, want 2", m)
	}

	// 503 twice (Retry-After: 0), then vectors.
	f.fail = func(n int) (int, string, map[string]string) {
		if n <= 7 {
			return 503, `{"error": "loading"}`, map[string]string{"Retry-After": "0"}
		}
		return 0, "", nil
	}
	if _, err := r.EmbedDocuments(ctx, texts[:2]); err != nil {
		t.Fatalf("after two 503s: %v", err)
	}
	// A refusal is not retried, and says why.
	f.mu.Lock()
	before := len(f.batches)
	f.mu.Unlock()
	f.fail = func(int) (int, string, map[string]string) {
		return 413, `{"error": "Input validation error: inputs must have less than 512 tokens", "error_type": "Validation"}`, nil
	}
	_, err = r.EmbedDocuments(ctx, texts[:1])
	if err == nil || !strings.Contains(err.Error(), "less than 512 tokens") || !strings.Contains(err.Error(), "413") {
		t.Errorf("a refusal: %v", err)
	}
	f.mu.Lock()
	if len(f.batches) != before+1 {
		t.Errorf("a refusal was sent %d times", len(f.batches)-before)
	}
	f.mu.Unlock()
	// A server that never answers: cancelled within a request.
	f.fail, f.delay = nil, time.Hour
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := r.EmbedQueries(cctx, texts, encoder.Prompt{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the cancel took %s", d)
	}
}

// TestRemoteRetriesRunOut: a server that keeps failing is asked
// Retries+1 times, then named.
func TestRemoteRetriesRunOut(t *testing.T) {
	f := &fakeEmbeddings{}
	hs := httptest.NewServer(f)
	defer hs.Close()
	r, err := encoder.OpenRemote(context.Background(), hs.URL+"#m", encoder.RemoteOptions{Retries: 2, Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f.fail = func(int) (int, string, map[string]string) {
		return 502, "bad gateway", map[string]string{"Retry-After": "0"}
	}
	_, err = r.EmbedDocuments(context.Background(), []string{"x"})
	if err == nil || !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), hs.URL) {
		t.Fatalf("%v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.batches) != 1+3 {
		t.Errorf("%d requests, want the probe and 3", len(f.batches))
	}
	if _, err := encoder.OpenRemote(context.Background(), "http://127.0.0.1:1/v1#m", encoder.RemoteOptions{Retries: -1}); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("nothing listening: %v", err)
	}
}
