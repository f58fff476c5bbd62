package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/index/weaviate"
)

// TestWeaviateCLI: index, search and reindex with --backend weaviate
// against the test cluster (`make test-cluster`), the API key from the
// environment only; without it every command is refused.
func TestWeaviateCLI(t *testing.T) {
	urls := os.Getenv("ANNA_WEAVIATE_URLS")
	if urls == "" {
		t.Skip("no Weaviate cluster (ANNA_WEAVIATE_URLS unset): `make test-cluster` runs this against 3 nodes on loopback")
	}
	alias := testAlias(t, urls, "C")
	dir := t.TempDir()
	corpus := writeCorpus(t, dir, 40, 12, 1)
	idx := filepath.Join(dir, "idx")
	wv := []string{"--backend", "weaviate", "--weaviate-url", urls, "--weaviate-alias", alias}
	mustRun(t, append([]string{"index", "--index", idx, "--weaviate-replication", "2", corpus}, wv...)...)
	r := mustRun(t, append([]string{"search", "--index", idx, "--json", "-k", "3", "document 7"}, wv...)...)
	if !strings.Contains(r.stdout, `"d007"`) {
		t.Fatalf("search: d007 not found:\n%s", r)
	}
	c, err := weaviate.New(weaviate.Config{URLs: strings.Split(urls, ","), APIKey: os.Getenv(apiKeyEnv), Alias: alias})
	if err != nil {
		t.Fatal(err)
	}
	before, _, err := c.Resolve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, append([]string{"stats", "--index", idx}, wv...)...); !strings.Contains(r.stdout, "weaviate") {
		t.Fatalf("stats --backend weaviate does not name the backend:\n%s", r)
	}
	mustRun(t, append([]string{"reindex", "--index", idx, "--chunk-tokens", "64"}, wv...)...)
	after, _, err := c.Resolve(context.Background())
	if err != nil || after.Name() == before.Name() {
		t.Fatalf("reindex did not move alias %s off %s (now %v, %v)", alias, before.Name(), after, err)
	}
	// A document's own text embeds to its own vector: dense rank 1.
	raw, err := os.ReadFile(corpus)
	if err != nil {
		t.Fatal(err)
	}
	var d12 struct{ Title, Text string }
	if err := json.Unmarshal([]byte(strings.Split(string(raw), "\n")[12]), &d12); err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, append([]string{"search", "--index", idx, "--json", "--mode", "dense", "-k", "1", d12.Title + " " + d12.Text}, wv...)...); !strings.Contains(r.stdout, `"d012"`) {
		t.Fatalf("dense search after reindex: d012 not first:\n%s", r)
	}

	t.Setenv(apiKeyEnv, "")
	r = annactl(t, "", append([]string{"search", "--index", idx, "document 7"}, wv...)...)
	if r.code == 0 || !strings.Contains(r.stderr, "401") {
		t.Fatalf("search without the API key: %s", r)
	}
	if r := annactl(t, "", "search", "--index", idx, "--weaviate-url", urls, "x"); r.code == 0 || !strings.Contains(r.stderr, "--backend weaviate") {
		t.Fatalf("--weaviate-url without --backend weaviate: %s", r)
	}
}

// TestWeaviateMine: mine-negatives reads its candidates from the cluster,
// and the fusion teacher's BM25 signal scores documents by ID there.
func TestWeaviateMine(t *testing.T) {
	urls := os.Getenv("ANNA_WEAVIATE_URLS")
	if urls == "" {
		t.Skip("no Weaviate cluster (ANNA_WEAVIATE_URLS unset): `make test-cluster` runs this against 3 nodes on loopback")
	}
	alias := testAlias(t, urls, "M")
	tmp := t.TempDir()
	ds := writeBEIR(t, filepath.Join(tmp, "ds"), 40, 16, 3)
	out := filepath.Join(tmp, "mined.jsonl")
	r := mustRun(t, "mine-negatives", "--dataset", ds, "--split", "train", "--index", filepath.Join(tmp, "idx"), "--output", out,
		"--negatives", "3", "--top-k", "20", "--seed", "7", "--teacher", "fusion", "--calibrate", "8",
		"--backend", "weaviate", "--weaviate-url", urls, "--weaviate-alias", alias)
	var st struct {
		Examples int                `json:"examples"`
		Quality  map[string]float64 `json:"teacher_quality"`
	}
	b, err := os.ReadFile(out + ".stats.json")
	if err != nil || json.Unmarshal(b, &st) != nil || st.Examples == 0 || st.Quality["queries"] != 16 {
		t.Fatalf("stats %s (%v)\n%s", b, err, r)
	}
}

// testAlias is a fresh Weaviate alias whose collections are dropped when
// the test ends.
func testAlias(t *testing.T, urls, prefix string) string {
	alias := fmt.Sprintf("%s%x", prefix, rand.Uint64())
	t.Cleanup(func() {
		c, err := weaviate.New(weaviate.Config{URLs: strings.Split(urls, ","), APIKey: os.Getenv(apiKeyEnv), Alias: alias})
		if err == nil {
			err = c.DropAll(context.Background())
		}
		if err != nil {
			t.Errorf("dropping alias %s: %v", alias, err)
		}
	})
	return alias
}
