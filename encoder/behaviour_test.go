package encoder

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/anna-search/anna/model"
)

func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i]-b[i])))
	}
	return m
}

// A text's vector must not depend on what it is batched with (see also
// TestVectorIsItsOwn, which asks for the same bits in float32 and int8).
func TestBatchInvariance(t *testing.T) {
	ctx := context.Background()
	// The token cap lifted: batches as large as the lengths allow
	// (internal/inference gives every batch one length).
	enc, err := Load(ctx, testModel(t), Options{BatchTokens: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	texts := []string{
		"short",
		"A considerably longer sentence about protein folding, with several clauses, commas and a number: 42.",
		"",
		"Mid-length text on ribosomes.",
		strings.Repeat("very long input that will be truncated to the model's max length ", 40),
		"The cat sits outside",
		"Ünïcödé text — with dashes and emoji 🙂",
		"The dog sits outside", // the length of another: the two share a batch
	}
	batch, err := enc.EmbedDocuments(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(batch) != len(texts) {
		t.Fatalf("got %d vectors for %d texts", len(batch), len(texts))
	}
	for i, text := range texts {
		alone, err := enc.EmbedDocuments(ctx, []string{text})
		if err != nil {
			t.Fatal(err)
		}
		if len(alone[0]) != enc.Dim() {
			t.Fatalf("text %d: dim %d, want %d", i, len(alone[0]), enc.Dim())
		}
		if d := maxAbsDiff(alone[0], batch[i]); d >= 1e-5 {
			t.Errorf("text %d (%.30q): alone vs in a batch differ by %.2g (want < 1e-5)", i, text, d)
		}
	}
	// Small batches force several ONNX Runtime calls and the length sort
	// to reorder; results must still come back in input order, whether the
	// batches run in parallel (3 workers) or one after another.
	serial, err := Load(ctx, testModel(t), Options{BatchSize: 2, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer serial.Close()
	want, err := serial.EmbedDocuments(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	small, err := Load(ctx, testModel(t), Options{BatchSize: 2, Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	got, err := small.EmbedDocuments(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range texts {
		if d := maxAbsDiff(got[i], batch[i]); d >= 1e-5 {
			t.Errorf("batch size 2: text %d differs by %.2g from batch size 32", i, d)
		}
		if d := maxAbsDiff(got[i], want[i]); d != 0 {
			t.Errorf("batch size 2: text %d differs by %.2g between 3 workers and 1", i, d)
		}
	}
	// Seven lengths: seven batches, of two texts at most, and the eight
	// texts alone.
	if st := small.Stats(); st.Batches != 7 || st.Texts != int64(len(texts)) || st.RunTime <= 0 || st.FLOPs <= 0 || st.PaddedTokens != st.Tokens {
		t.Errorf("stats after one call of 8 texts in batches of 2: %+v (want 7 batches, no padding)", st)
	}
	if st := enc.Stats(); st.Batches != 7+int64(len(texts)) || st.PaddedTokens != st.Tokens {
		t.Errorf("uncapped: %d batches for one call of 8 texts of 7 lengths and 8 alone, want 15, and no padding (%d padded tokens for %d)", st.Batches, st.PaddedTokens, st.Tokens)
	}
	// A token cap under every text's length runs each alone.
	capped, err := Load(ctx, testModel(t), Options{BatchTokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer capped.Close()
	if got, err = capped.EmbedDocuments(ctx, texts); err != nil {
		t.Fatal(err)
	}
	for i := range texts {
		if d := maxAbsDiff(got[i], batch[i]); d >= 1e-5 {
			t.Errorf("one token a batch: text %d differs by %.2g from the batch", i, d)
		}
	}
	if st := capped.Stats(); st.Batches != int64(len(texts)) || st.PaddedTokens != st.Tokens {
		t.Errorf("one token a batch: %d batches, %d padded tokens for %d tokens; want 8 batches, no padding", st.Batches, st.PaddedTokens, st.Tokens)
	}
}

// Empty text is allowed and embeds [CLS] [SEP] alone; invalid UTF-8 is
// repaired to U+FFFD per bad sequence, as Python's errors="replace".
func TestEdgeTexts(t *testing.T) {
	enc := testEncoder(t)
	ctx := context.Background()
	v, err := enc.EmbedDocuments(ctx, []string{"", "   ", "caf\xe9 au lait", "caf\uFFFD au lait", "ok"})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range v {
		for _, f := range x {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				t.Fatalf("vector %d has a non-finite value", i)
			}
		}
		if n := dot(x, x); math.Abs(n-1) > 1e-5 {
			t.Errorf("vector %d: squared norm %v, want 1", i, n)
		}
	}
	if d := maxAbsDiff(v[0], v[1]); d > 1e-6 {
		t.Errorf("empty and whitespace-only text should both embed the special tokens alone; differ by %g", d)
	}
	if d := maxAbsDiff(v[2], v[3]); d > 1e-6 {
		t.Errorf("invalid UTF-8 should embed like its U+FFFD repair; differ by %g", d)
	}
	if d := maxAbsDiff(v[0], v[4]); d < 1e-3 {
		t.Errorf("empty text and \"ok\" embed the same (diff %g)", d)
	}
	none, err := enc.EmbedDocuments(ctx, nil)
	if err != nil || len(none) != 0 {
		t.Errorf("no texts: got %d vectors, err %v", len(none), err)
	}
}

func TestCancelledContext(t *testing.T) {
	enc := testEncoder(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := enc.EmbedDocuments(ctx, []string{"a", "b"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: err = %v, want context.Canceled", err)
	}
}

// Run with -race: concurrent calls share one session and tokenizer.
func TestConcurrentUse(t *testing.T) {
	enc := testEncoder(t)
	ctx := context.Background()
	texts := make([]string, 12)
	for i := range texts {
		texts[i] = fmt.Sprintf("sentence number %d about %s", i, strings.Repeat("cells ", i))
	}
	want, err := enc.EmbedDocuments(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for r := range 3 {
				i := (g*3 + r) % len(texts)
				got, err := enc.EmbedQueries(ctx, texts[i:i+1], Prompt{})
				if err != nil {
					errs <- err
					return
				}
				if d := maxAbsDiff(got[0], want[i]); d >= 1e-5 {
					errs <- fmt.Errorf("goroutine %d text %d differs by %g", g, i, d)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestPromptFormat(t *testing.T) {
	enc := testEncoder(t)
	if got := enc.FormatQuery("q?", Prompt{}); got != "q?" {
		t.Errorf("zero prompt: %q", got)
	}
	p := Prompt{Instruction: "Find abstracts that support the claim", Examples: []Example{{Query: "a", Response: "b"}}}
	want := "Instruct: Find abstracts that support the claim\nQuery: a\nResponse: b\n\n" +
		"Instruct: Find abstracts that support the claim\nQuery: q?"
	if got := enc.FormatQuery("q?", p); got != want {
		t.Errorf("few-shot prompt:\n got %q\nwant %q", got, want)
	}
	if got := FormatQuery(model.DefaultInstructionTemplate, "query: ", Prompt{}, "x"); got != "query: x" {
		t.Errorf("prefix without instruction: %q", got)
	}
	// The instruction changes the query vector but not documents.
	ctx := context.Background()
	plain, err := enc.EmbedQueries(ctx, []string{"q?"}, Prompt{})
	if err != nil {
		t.Fatal(err)
	}
	instr, err := enc.EmbedQueries(ctx, []string{"q?"}, p)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := enc.EmbedDocuments(ctx, []string{"q?"})
	if err != nil {
		t.Fatal(err)
	}
	if maxAbsDiff(plain[0], doc[0]) > 1e-6 || maxAbsDiff(plain[0], instr[0]) < 1e-3 {
		t.Errorf("a plain query should embed like the document and an instructed one differently")
	}
}

func TestPooling(t *testing.T) {
	hidden := []float32{1, 2, 3, 4, 100, 100} // 3 tokens × 2 dims, last is padding
	mask := []int64{1, 1, 0}
	v := make([]float32, 2)
	pool(v, hidden, mask, model.PoolingMean)
	if v[0] != 2 || v[1] != 3 {
		t.Errorf("mean: %v, want [2 3]", v)
	}
	pool(v, hidden, mask, model.PoolingCLS)
	if v[0] != 1 || v[1] != 2 {
		t.Errorf("cls: %v, want [1 2]", v)
	}
	pool(v, hidden, mask, model.PoolingLastToken)
	if v[0] != 3 || v[1] != 4 {
		t.Errorf("lasttoken: %v, want [3 4]", v)
	}
	z := []float32{0, 0}
	normalize(z)
	if z[0] != 0 || z[1] != 0 {
		t.Errorf("normalising a zero vector gave %v", z)
	}
}

// copyModel makes a writable copy of the model directory, minus skip, via
// symlinks for the big files.
func copyModel(t *testing.T, skip ...string) string {
	t.Helper()
	src := testModel(t)
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
outer:
	for _, e := range entries {
		for _, s := range skip {
			if e.Name() == s {
				continue outer
			}
		}
		abs, _ := filepath.Abs(filepath.Join(src, e.Name()))
		if err := os.Symlink(abs, filepath.Join(dst, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestLoadErrors(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		setup func(dir string)
		skip  []string
		want  string
	}{
		{"missing model.onnx", nil, []string{"model.onnx"}, "model.onnx"},
		{"missing manifest", nil, []string{model.ManifestFile}, model.ManifestFile},
		{"corrupt tokenizer.json", func(dir string) {
			os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{"model": {"type": "WordPiece", "vocab": [`), 0o644)
		}, []string{"tokenizer.json"}, "tokenizer"},
		{"config disagrees with manifest", func(dir string) {
			b, _ := os.ReadFile(filepath.Join(testModel(t), "config.json"))
			b = []byte(strings.Replace(string(b), `"hidden_size": 384`, `"hidden_size": 768`, 1))
			os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
		}, []string{"config.json"}, "hidden_size 768"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyModel(t, c.skip...)
			if c.setup != nil {
				c.setup(dir)
			}
			enc, err := Load(ctx, dir, Options{})
			if err == nil {
				enc.Close()
				t.Fatal("Load succeeded")
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
	if _, err := Load(ctx, testModel(t), Options{MaxLength: 100000}); err == nil || !strings.Contains(err.Error(), "max_position_embeddings") {
		t.Errorf("oversized max length: %v", err)
	}
}

func TestClosed(t *testing.T) {
	enc, err := Load(context.Background(), testModel(t), Options{IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := enc.EmbedDocuments(context.Background(), []string{"x"}); err == nil {
		t.Error("embedding after Close succeeded")
	}
	if err := enc.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
