package rerank

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/inference/inferencetest"
	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/model"
)

// Loading creates no session, nor does scoring no documents; the first
// Score with documents does, once; a damaged model.onnx is reported there.
func TestLazySession(t *testing.T) {
	w, b := sinHead(t)
	r := export(t, w, b, Options{IntraOpThreads: 2})
	ctx := context.Background()
	if s, err := r.Score(ctx, "q", nil); err != nil || len(s) != 0 {
		t.Errorf("no docs: %v %v", s, err)
	}
	if n := r.m.Sessions(); n != 0 {
		t.Errorf("%d sessions before scoring a document", n)
	}
	for range 2 {
		if _, err := r.Score(ctx, "q", []string{"a", "b c"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.m.Sessions(); n != 1 {
		t.Errorf("%d sessions after two calls, want 1", n)
	}

	// A damaged graph beside the real manifest: Load succeeds, Score says
	// which file is wrong, Close works.
	dir := filepath.Join(t.TempDir(), "damaged")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{model.ManifestFile, "config.json", onnx.TokenizerFile} {
		data, err := os.ReadFile(filepath.Join(r.m.Path(), f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), []byte("not a protobuf"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, err := Load(ctx, dir, Options{})
	if err != nil {
		t.Fatalf("Load reads no graph, yet: %v", err)
	}
	_, err = bad.Score(ctx, "q", []string{"d"})
	t.Logf("damaged model.onnx: %v", err)
	if err == nil || !strings.HasPrefix(err.Error(), "rerank: ") || !strings.Contains(err.Error(), "model.onnx") {
		t.Errorf("scoring with a damaged model.onnx: %v", err)
	}
	if err := bad.Close(); err != nil {
		t.Errorf("Close after a failed session: %v", err)
	}
}

// Run with -race: goroutines scoring at once on a fresh reranker share one
// session, created once; batches of one call on 3 workers score exactly
// as one after another.
func TestConcurrentFirstScore(t *testing.T) {
	w, b := sinHead(t)
	serial := export(t, w, b, Options{IntraOpThreads: 1, BatchSize: 2})
	r, err := Load(context.Background(), serial.m.Path(), Options{IntraOpThreads: 1, BatchSize: 2, Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	docs := []string{"ribosomes make proteins", "", "the market fell", "short", strings.Repeat("long text ", 30), "mitochondria"}
	const G = 4
	errs := inferencetest.Concurrently(G, func(g int) error {
		q := fmt.Sprintf("query %d", g)
		got, err := r.Score(ctx, q, docs[g:])
		if err != nil {
			return err
		}
		want, err := serial.Score(ctx, q, docs[g:])
		if err != nil {
			return err
		}
		for i := range got {
			if got[i] != want[i] {
				return fmt.Errorf("goroutine %d doc %d: %v on 3 workers, %v on 1", g, i, got[i], want[i])
			}
		}
		return nil
	})
	for _, err := range errs {
		t.Error(err)
	}
	if n := r.m.Sessions(); n != 1 {
		t.Errorf("%d concurrent first calls created %d sessions, want 1", G, n)
	}
}
