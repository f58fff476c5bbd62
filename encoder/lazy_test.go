package encoder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/inference/inferencetest"
)

// sessions is how many ONNX Runtime sessions e has created.
func sessions(e *Model) int64 { return e.m.Sessions() }

// docsAndQuery embeds texts as documents, then the first as a query.
func docsAndQuery(t *testing.T, e Encoder, texts []string) [][]float32 {
	t.Helper()
	ctx := context.Background()
	docs, err := e.EmbedDocuments(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	q, err := e.EmbedQueries(ctx, texts[:1], Prompt{})
	if err != nil {
		t.Fatal(err)
	}
	return append(docs, q[0])
}

// Opening a model to read its fingerprint and dim, embedding nothing and
// serving every text from the cache create no session; Close works without
// one.
func TestLazySession(t *testing.T) {
	ctx := context.Background()
	texts := []string{"lazy sessions", "are created on first use", ""}
	// Fill a cache with the shared encoder.
	dir := t.TempDir()
	warm, err := NewCache(testEncoder(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := docsAndQuery(t, warm, texts)

	enc, err := Load(ctx, testModel(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if enc.Dim() != 384 || enc.Fingerprint() == "" || enc.MaxLength() != 256 {
		t.Errorf("dim %d, fingerprint %q, max length %d", enc.Dim(), enc.Fingerprint(), enc.MaxLength())
	}
	if v, err := enc.EmbedDocuments(ctx, nil); err != nil || len(v) != 0 {
		t.Errorf("no texts: %d vectors, %v", len(v), err)
	}
	c, err := NewCache(enc, dir)
	if err != nil {
		t.Fatal(err)
	}
	got := docsAndQuery(t, c, texts)
	if c.Hits() != 4 || c.Misses() != 0 {
		t.Errorf("cache hits %d, misses %d; want 4 and 0", c.Hits(), c.Misses())
	}
	for i := range want {
		if d := maxAbsDiff(got[i], want[i]); d != 0 {
			t.Errorf("vector %d: cached vector differs by %g", i, d)
		}
	}
	if n := sessions(enc); n != 0 {
		t.Errorf("%d sessions created without a text to embed", n)
	}
	if st := enc.Stats(); st.SessionTime != 0 || st.Batches != 0 {
		t.Errorf("stats before any run: %+v", st)
	}
	if err := enc.Close(); err != nil {
		t.Errorf("Close without a session: %v", err)
	}
	if _, err := enc.EmbedDocuments(ctx, texts); err == nil {
		t.Error("embedding after Close succeeded")
	}
	if n := sessions(enc); n != 0 {
		t.Errorf("embedding after Close created %d sessions", n)
	}

	// The first embed with a text creates the session, once.
	enc2, err := Load(ctx, testModel(t), Options{IntraOpThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer enc2.Close()
	for range 2 {
		v, err := enc2.EmbedDocuments(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		if d := maxAbsDiff(v[0], want[0]); d != 0 {
			t.Errorf("vector differs by %g from the shared encoder's", d)
		}
	}
	if st := enc2.Stats(); sessions(enc2) != 1 || st.SessionTime <= 0 || st.Texts != 6 {
		t.Errorf("after two calls: %d sessions, stats %+v", sessions(enc2), st)
	}
}

// A damaged model.onnx is found by the first embed call, which says which
// file; so is every later call, and Close still works.
func TestLazySessionError(t *testing.T) {
	ctx := context.Background()
	dir := copyModel(t, "model.onnx")
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), []byte("not a protobuf"), 0o644); err != nil {
		t.Fatal(err)
	}
	enc, err := Load(ctx, dir, Options{})
	if err != nil {
		t.Fatalf("Load reads no graph, yet: %v", err)
	}
	for i := range 2 {
		_, err := enc.EmbedQueries(ctx, []string{"x"}, Prompt{})
		if err == nil {
			t.Fatal("embedding with a damaged model.onnx succeeded")
		}
		t.Logf("call %d: %v", i, err)
		if !strings.Contains(err.Error(), "model.onnx") || !strings.HasPrefix(err.Error(), "encoder: ") {
			t.Errorf("error %q does not say encoder and model.onnx", err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Errorf("Close after a failed session: %v", err)
	}
}

// Run with -race: goroutines embedding at once on a fresh encoder share
// one session, created once.
func TestConcurrentFirstEmbed(t *testing.T) {
	ctx := context.Background()
	want := testEncoder(t)
	enc, err := Load(ctx, testModel(t), Options{IntraOpThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	const G = 6
	errs := inferencetest.Concurrently(G, func(g int) error {
		text := []string{fmt.Sprintf("goroutine %d embeds %s", g, strings.Repeat("this ", g))}
		var got [][]float32
		var err error
		if g%2 == 0 {
			got, err = enc.EmbedDocuments(ctx, text)
		} else {
			got, err = enc.EmbedQueries(ctx, text, Prompt{})
		}
		if err != nil {
			return err
		}
		ref, err := want.EmbedDocuments(ctx, text)
		if err != nil {
			return err
		}
		if d := maxAbsDiff(got[0], ref[0]); d != 0 {
			return fmt.Errorf("goroutine %d: vector differs by %g", g, d)
		}
		return nil
	})
	for _, err := range errs {
		t.Error(err)
	}
	if n := sessions(enc); n != 1 {
		t.Errorf("%d concurrent first calls created %d sessions, want 1", G, n)
	}
}
