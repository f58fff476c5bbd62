package engine_test

// Tests of the Weaviate backend against a real cluster: they run under
// `make test-cluster` (scripts/weaviate.sh run starts 3 nodes on loopback
// and sets ANNA_WEAVIATE_URLS, ANNA_WEAVIATE_API_KEY, ANNA_WEAVIATE_DIR and
// ANNA_WEAVIATE_SCRIPT) and skip without it.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/encodertest"
	"github.com/anna-search/anna/internal/index/weaviate"
)

// clusterWeaviate returns engine options for the test cluster with a fresh
// alias (its collections dropped when t ends), or skips t.
func clusterWeaviate(t *testing.T) *engine.Weaviate {
	t.Helper()
	urls := os.Getenv("ANNA_WEAVIATE_URLS")
	if urls == "" {
		t.Skip("no Weaviate cluster (ANNA_WEAVIATE_URLS unset): `make test-cluster` builds weaviate-server v1.35.2 into $ANNA_HOME/weaviate and runs these tests against 3 nodes on loopback")
	}
	w := &engine.Weaviate{URLs: strings.Split(urls, ","), APIKey: os.Getenv("ANNA_WEAVIATE_API_KEY"),
		Alias: fmt.Sprintf("E%x", rand.Uint64()), Replication: 2}
	t.Cleanup(func() {
		c, err := weaviate.New(weaviate.Config{URLs: w.URLs, APIKey: w.APIKey, Alias: w.Alias})
		if err == nil {
			err = c.DropAll(context.Background())
		}
		if err != nil {
			t.Errorf("dropping the test collections of alias %s: %v", w.Alias, err)
		}
	})
	return w
}

// collection returns the collection alias w points at now.
func collection(t *testing.T, w *engine.Weaviate) *weaviate.Collection {
	t.Helper()
	c, err := weaviate.New(weaviate.Config{URLs: append([]string(nil), w.URLs...), APIKey: w.APIKey, Alias: w.Alias})
	if err != nil {
		t.Fatal(err)
	}
	co, ok, err := c.Resolve(context.Background())
	if err != nil || !ok {
		t.Fatalf("alias %s: %v, %v", w.Alias, ok, err)
	}
	return co
}

func openWeaviate(t *testing.T, dir, fp string, w *engine.Weaviate) *engine.Engine {
	t.Helper()
	e, err := engine.Open(context.Background(), dir, engine.Options{Encoder: hashEnc(fp), Weaviate: w})
	if err != nil {
		t.Fatalf("open %s on Weaviate: %v", dir, err)
	}
	return e
}

func taggedDoc(n int) engine.Document {
	d := doc(n)
	d.Meta = map[string]string{"lang": []string{"en", "de", "fr"}[n%3]}
	return d
}

// TestWeaviateBackendMatchesLocal: the same documents through both
// backends: dense lists equal (ids and cosines), BM25 finds the same
// unique terms, hybrid explains both lists, filters, deletes, reopening in
// step, a read-only open, and a directory with another store rebuilding
// the alias's collection.
func TestWeaviateBackendMatchesLocal(t *testing.T) {
	w := clusterWeaviate(t)
	ctx := context.Background()
	loc := openT(t, t.TempDir(), "fp-a")
	defer loc.Close()
	rdir := t.TempDir()
	rem := openWeaviate(t, rdir, "fp-a", w)
	const n = 300
	for start := 0; start < n; start += 50 {
		var docs []engine.Document
		for i := start; i < start+50; i++ {
			docs = append(docs, taggedDoc(i))
		}
		for _, e := range []*engine.Engine{loc, rem} {
			if _, err := e.Add(ctx, docs); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := rem.Stats()
	if err != nil || st.LexicalDocs != n || st.DenseDocs != n || st.DensePassages != n || !strings.HasPrefix(st.Backend, "weaviate "+w.Alias) {
		t.Fatalf("Stats = %+v, %v", st, err)
	}
	for _, q := range []string{"tok7 title 7", "tok123", "title 250 search", "tok42 tok43"} {
		for _, f := range []engine.Filter{{}, engine.Eq("lang", "de"), engine.Not(engine.In("lang", "de", "fr"))} {
			opts := engine.SearchOptions{Mode: engine.ModeDense, K: 10, Filter: f}
			a, err := loc.Search(ctx, q, opts)
			if err != nil {
				t.Fatal(err)
			}
			b, err := rem.Search(ctx, q, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(a) != len(b) || len(a) == 0 || a[0].ID != b[0].ID {
				t.Fatalf("dense %q %v: local %v, Weaviate %v", q, f, ids(a), ids(b))
			}
			for i := range a {
				if math.Abs(a[i].Score-b[i].Score) > 1e-5 {
					t.Errorf("dense %q %v #%d: local %s %.6f, Weaviate %s %.6f", q, f, i, a[i].ID, a[i].Score, b[i].ID, b[i].Score)
				}
				if !f.Match(b[i].Meta) {
					t.Errorf("dense %q %v: %s (meta %v) does not match the filter", q, f, b[i].ID, b[i].Meta)
				}
			}
		}
	}
	mustFindFirst(t, rem, engine.ModeLexical, "tok42", "d00042")
	mustFindFirst(t, rem, engine.ModeHybrid, "tok99", "d00099")
	rs, err := rem.Search(ctx, "tok77", engine.SearchOptions{K: 3, Snippets: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 || rs[0].ID != "d00077" || len(rs[0].Explain) != 2 || rs[0].Explain[0].List != "lexical" || rs[0].Explain[1].List != "dense" || rs[0].Snippet == nil {
		t.Fatalf("hybrid tok77: %+v", rs)
	}

	// Deleted documents leave both lists.
	if n, err := rem.Delete(ctx, []string{"d00042"}); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	for _, m := range []engine.Mode{engine.ModeLexical, engine.ModeDense} {
		rs, err := rem.Search(ctx, "tok42", engine.SearchOptions{Mode: m, K: 50})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(ids(rs), "d00042") {
			t.Fatalf("%s: deleted d00042 still found", m)
		}
	}
	if err := rem.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened: in step, nothing rebuilt.
	rem = openWeaviate(t, rdir, "fp-a", w)
	if ws := rem.Warnings(); len(ws) > 0 {
		t.Fatalf("reopen warned: %v", ws)
	}
	mustFindFirst(t, rem, engine.ModeHybrid, "tok43", "d00043")
	rem.Close()
	ro, err := engine.Open(ctx, rdir, engine.Options{Encoder: hashEnc("fp-a"), Weaviate: w, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	mustFindFirst(t, ro, engine.ModeDense, "tok44 title 44", "d00044")
	ro.Close()

	// Another directory on the same alias is refused: rebuilding the
	// collection would take it from this one.
	_, err = engine.Open(ctx, t.TempDir(), engine.Options{Encoder: hashEnc("fp-a"), Weaviate: w})
	if !errors.Is(err, engine.ErrInvalidOption) || !strings.Contains(err.Error(), "another anna directory") {
		t.Fatalf("another directory on alias %s: err = %v, want it refused", w.Alias, err)
	}

	// BM25 scores of given documents (mining's teacher) equal the lexical
	// list's.
	rem = openWeaviate(t, rdir, "fp-a", w)
	defer rem.Close()
	rs, err = rem.Search(ctx, "tok43 shared", engine.SearchOptions{Mode: engine.ModeLexical, K: 300})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]float64{}
	for _, r := range rs {
		byID[r.ID] = r.Score
	}
	sc, err := rem.Teacher().LexicalScores(ctx, "tok43 shared", []engine.Document{{ID: "d00043"}, {ID: "d00044"}, {ID: "absent"}})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(sc[0]-byID["d00043"]) > 1e-4 || math.Abs(sc[1]-byID["d00044"]) > 1e-4 || sc[2] != 0 || sc[0] <= sc[1] {
		t.Fatalf("LexicalScores = %v; the lexical list scored d00043 %v, d00044 %v", sc, byID["d00043"], byID["d00044"])
	}
	if _, err := rem.Teacher().LexicalScores(ctx, "tok43", []engine.Document{{Text: "no id"}}); !errors.Is(err, engine.ErrUnsupported) {
		t.Fatalf("LexicalScores of a text: err = %v, want ErrUnsupported", err)
	}
}

// TestWeaviateReindex: Reindex fills a new collection and moves the alias
// while searches keep answering; the old collection is dropped.
func TestWeaviateReindex(t *testing.T) {
	w := clusterWeaviate(t)
	ctx := context.Background()
	dir := t.TempDir()
	e := openWeaviate(t, dir, "fp-a", w)
	defer e.Close()
	var docs []engine.Document
	for i := range 200 {
		docs = append(docs, doc(i))
	}
	if _, err := e.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	before := collection(t, w).Name()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var searches int
	var searchErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			rs, err := e.Search(ctx, "tok5 title 5", engine.SearchOptions{K: 3})
			if err == nil && (len(rs) == 0 || rs[0].ID != "d00005") {
				err = fmt.Errorf("got %v", ids(rs))
			}
			if err != nil {
				searchErr = err
				return
			}
			searches++
		}
	}()
	err := e.Reindex(ctx, engine.ReindexOptions{Encoder: &encodertest.Hashing{D: 32, FP: "fp-b"}, Model: "/models/b", BatchSize: 50})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if searchErr != nil {
		t.Fatalf("a search during the reindex failed: %v", searchErr)
	}
	after := collection(t, w).Name()
	if after == before {
		t.Fatalf("the alias still points at %s", before)
	}
	st, err := e.Stats()
	if err != nil || st.Model.Fingerprint != "fp-b" || st.DenseDocs != 200 || !strings.Contains(st.Backend, after) {
		t.Fatalf("after reindex: %+v, %v", st, err)
	}
	c, _ := weaviate.New(weaviate.Config{URLs: append([]string(nil), w.URLs...), APIKey: w.APIKey, Alias: w.Alias})
	gens, err := c.Generations(ctx)
	if err != nil || len(gens) != 1 || gens[0].Name() != after {
		t.Fatalf("generations after reindex = %v, %v; want only %s", gens, err, after)
	}
	t.Logf("%d searches answered during the reindex; alias moved %s -> %s", searches, before, after)
	e.Close()
	e2, err := engine.Open(ctx, dir, engine.Options{Encoder: &encodertest.Hashing{D: 32, FP: "fp-b"}, Weaviate: w})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if ws := e2.Warnings(); len(ws) > 0 {
		t.Fatalf("reopen after reindex warned: %v", ws)
	}
	mustFindFirst(t, e2, engine.ModeDense, "tok9 title 9", "d00009")
}

// TestWeaviateRefusedWithoutKey: an engine without the API key cannot
// open on the cluster, and says why.
func TestWeaviateRefusedWithoutKey(t *testing.T) {
	w := clusterWeaviate(t)
	bad := *w
	bad.APIKey = ""
	_, err := engine.Open(context.Background(), t.TempDir(), engine.Options{Encoder: hashEnc("fp-a"), Weaviate: &bad})
	if !errors.Is(err, engine.ErrBackend) || !errors.Is(err, weaviate.ErrUnauthorized) {
		t.Fatalf("open without the key: err = %v, want ErrBackend and ErrUnauthorized", err)
	}
	t.Logf("refused: %v", err)
}

// TestWeaviateNodeKilledDuringIngest: one node is killed (SIGKILL) in the
// middle of an ingest into a collection replicated twice, and the ingest
// goes on. A batch whose write did not reach enough replicas fails with
// ErrBackend, its documents committed to anna.db; batches after it may be
// acknowledged (Weaviate resolves QUORUM over the replicas it sees up).
// Every acknowledged document is searchable with the node down; once the
// node is back the same ingest run again completes (the next write replays
// what the collection missed), and the collection holds every document.
func TestWeaviateNodeKilledDuringIngest(t *testing.T) {
	w := clusterWeaviate(t)
	script, cdir := os.Getenv("ANNA_WEAVIATE_SCRIPT"), os.Getenv("ANNA_WEAVIATE_DIR")
	if script == "" || cdir == "" {
		t.Skip("ANNA_WEAVIATE_SCRIPT / ANNA_WEAVIATE_DIR unset: run under scripts/weaviate.sh run")
	}
	node := func(verb string) {
		out, err := exec.Command("bash", script, verb, cdir, "1").CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s node 1: %v\n%s", script, verb, err, out)
		}
	}
	ctx := context.Background()
	dir := t.TempDir()
	e := openWeaviate(t, dir, "fp-a", w)
	const n, batch, killAfter = 3000, 100, 8
	var all []engine.Document
	for i := range n {
		all = append(all, doc(i))
	}
	var acked, failed []string
	killed := false
	for b := 0; b*batch < n; b++ {
		if b == killAfter {
			node("node-stop")
			killed = true
			t.Cleanup(func() {
				if killed {
					exec.Command("bash", script, "node-start", cdir, "1").Run()
				}
			})
		}
		part := all[b*batch : (b+1)*batch]
		res, err := e.Add(ctx, part)
		if err != nil {
			if !res.Committed || !errors.Is(err, engine.ErrBackend) {
				t.Fatalf("batch %d: err = %v (committed %v), want a committed batch and ErrBackend", b, err, res.Committed)
			}
			if len(failed) == 0 {
				t.Logf("batch %d with node 1 down: %v", b, err)
			}
			for _, d := range part {
				failed = append(failed, d.ID)
			}
			continue
		}
		for _, d := range part {
			acked = append(acked, d.ID)
		}
	}
	t.Logf("node 1 killed after %d documents: %d acknowledged in all, %d in batches that failed (stored in anna.db, not acknowledged)", killAfter*batch, len(acked), len(failed))

	// Queries keep answering with the node down, and find acknowledged
	// documents.
	rng := rand.New(rand.NewPCG(5, 6))
	answered := 0
	for range 30 {
		i := rng.IntN(len(acked))
		want := acked[i]
		num := strings.TrimLeft(strings.TrimPrefix(want, "d"), "0")
		if num == "" {
			num = "0"
		}
		for _, m := range []engine.Mode{engine.ModeLexical, engine.ModeDense, engine.ModeHybrid} {
			rs, err := e.Search(ctx, "tok"+num+" title "+num, engine.SearchOptions{Mode: m, K: 3})
			if err != nil {
				t.Fatalf("%s search with node 1 down: %v", m, err)
			}
			if len(rs) == 0 || rs[0].ID != want {
				t.Fatalf("%s search for acknowledged %s with node 1 down: got %v", m, want, ids(rs))
			}
			answered++
		}
	}
	t.Logf("%d searches answered with node 1 down", answered)

	node("node-start")
	killed = false
	// The same ingest run again: what is stored is skipped, the rest added,
	// and the batch the collection missed is replayed.
	for b := 0; b*batch < n; b++ {
		if _, err := e.Add(ctx, all[b*batch:(b+1)*batch]); err != nil {
			t.Fatalf("resumed ingest, batch %d: %v", b, err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openWeaviate(t, dir, "fp-a", w) // applies anything still missed
	defer e.Close()
	got, err := collection(t, w).IDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("the collection holds %d documents after the resumed ingest, want %d", len(got), n)
	}
	have := make(map[string]bool, len(got))
	for _, id := range got {
		have[id] = true
	}
	for _, id := range acked {
		if !have[id] {
			t.Fatalf("acknowledged %s missing", id)
		}
	}
}
