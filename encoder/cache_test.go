package encoder

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
)

// counting wraps the ORT encoder (keeping its Formatter methods) and counts
// the texts it is asked to embed.
type counting struct {
	*Model
	n atomic.Int64
}

func (c *counting) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	c.n.Add(int64(len(texts)))
	return c.Model.EmbedDocuments(ctx, texts)
}

func (c *counting) EmbedQueries(ctx context.Context, qs []string, p Prompt) ([][]float32, error) {
	c.n.Add(int64(len(qs)))
	return c.Model.EmbedQueries(ctx, qs, p)
}

func TestCacheRoundTrip(t *testing.T) {
	enc := testEncoder(t)
	ctx := context.Background()
	dir := t.TempDir()
	inner := &counting{Model: enc}
	c, err := NewCache(inner, dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Fingerprint() != enc.Fingerprint() || c.Dim() != enc.Dim() {
		t.Fatal("cache must report the wrapped encoder's fingerprint and dim")
	}
	texts := []string{"alpha beta", "gamma", "alpha beta", "delta epsilon zeta"}
	first, err := c.EmbedDocuments(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	if n := inner.n.Load(); n != 3 {
		t.Errorf("first call embedded %d texts, want 3 (the duplicate once)", n)
	}
	direct, _ := enc.EmbedDocuments(ctx, texts)
	for i := range texts {
		if d := maxAbsDiff(first[i], direct[i]); d != 0 {
			t.Errorf("text %d: cached path differs from direct by %g", i, d)
		}
	}
	// A new Cache on the same dir (another process, say) reads the file.
	c2, err := NewCache(inner, dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c2.EmbedDocuments(ctx, append(texts, "new one"))
	if err != nil {
		t.Fatal(err)
	}
	if n := inner.n.Load(); n != 4 {
		t.Errorf("after the second call %d texts were embedded, want 4 (only the new one)", n)
	}
	if c2.Hits() != 4 || c2.Misses() != 1 {
		t.Errorf("hits %d misses %d, want 4 and 1", c2.Hits(), c2.Misses())
	}
	for i := range texts {
		if d := maxAbsDiff(first[i], second[i]); d != 0 {
			t.Errorf("text %d: vector read back differs by %g", i, d)
		}
	}
	// Queries are keyed by the formatted prompt: a plain query equals the
	// same document text, an instructed one is a different key.
	if _, err := c2.EmbedQueries(ctx, []string{"gamma"}, Prompt{}); err != nil {
		t.Fatal(err)
	}
	if n := inner.n.Load(); n != 4 {
		t.Errorf("plain query for a cached document text was re-embedded")
	}
	if _, err := c2.EmbedQueries(ctx, []string{"gamma"}, Prompt{Instruction: "retrieve"}); err != nil {
		t.Fatal(err)
	}
	if n := inner.n.Load(); n != 5 {
		t.Errorf("instructed query should miss the cache; embedded count %d, want 5", n)
	}
	if _, err := os.Stat(c.Path()); err != nil {
		t.Errorf("cache file: %v", err)
	}
}

type noFingerprint struct{ Encoder }

func (noFingerprint) Fingerprint() string { return "" }

func TestCacheRefusesEmptyFingerprint(t *testing.T) {
	if _, err := NewCache(noFingerprint{testEncoder(t)}, t.TempDir()); err == nil {
		t.Fatal("NewCache accepted an encoder without a fingerprint")
	}
}

func TestCachePutDocuments(t *testing.T) {
	enc := testEncoder(t)
	ctx := context.Background()
	inner := &counting{Model: enc}
	c, err := NewCache(inner, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"one", "two"}
	vecs, err := enc.EmbedDocuments(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PutDocuments(texts, vecs); err != nil {
		t.Fatal(err)
	}
	got, err := c.EmbedDocuments(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	if inner.n.Load() != 0 || maxAbsDiff(got[1], vecs[1]) != 0 {
		t.Errorf("stored vectors not served: %d embedded", inner.n.Load())
	}
	if err := c.PutDocuments(texts, vecs[:1]); err == nil {
		t.Error("PutDocuments accepted mismatched lengths")
	}
}
