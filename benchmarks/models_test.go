package benchmarks

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
)

// BenchmarkModelsSciFact embeds the same SciFact sample (the first 200
// abstracts, title + text, each model's own max length) with every
// installed catalogue model, reporting docs/s and tokens/s side by side;
// and, when bge-small-en-v1.5 is installed, the langchain4j ONNX file it
// was read from, run by the same ONNX Runtime through the same runner, in
// alternating rounds: anna's graph against it (goal >= 1.0x).
//
//	go test -v ./benchmarks -run '^$' -bench ModelsSciFact -benchtime 1x
func BenchmarkModelsSciFact(b *testing.B) {
	texts := encSciFactTexts(b)[:200]
	ctx := context.Background()
	embed := func(dir string) (docsPerS, tokPerS float64) {
		enc, err := encoder.Load(ctx, dir, encoder.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer enc.Close()
		if _, err := enc.EmbedDocuments(ctx, texts[:4]); err != nil {
			b.Fatal(err)
		}
		before := enc.Stats()
		start := time.Now()
		if _, err := enc.EmbedDocuments(ctx, texts); err != nil {
			b.Fatal(err)
		}
		wall := time.Since(start).Seconds()
		return float64(len(texts)) / wall, float64(enc.Stats().Tokens-before.Tokens) / wall
	}
	for range b.N {
		for _, e := range catalog.Entries() {
			dir := filepath.Join(home.ModelsDir(), e.Name)
			if _, err := model.LoadManifest(dir); err != nil {
				b.Logf("%s: not installed, skipped", e.Name)
				continue
			}
			d, tk := embed(dir)
			b.Logf("%-24s %6.1f docs/s %8.0f tokens/s", e.Name, d, tk)
			b.ReportMetric(d, e.Name+"_docs/s")
		}
		// anna's bge-small graph against the file it came from.
		bge := filepath.Join(home.ModelsDir(), "bge-small-en-v1.5")
		e, _ := catalog.Lookup("bge-small-en-v1.5")
		archive := filepath.Join(home.DownloadsDir(), filepath.Base(e.URL))
		if _, err := os.Stat(archive); err != nil {
			continue
		}
		if _, err := model.LoadManifest(bge); err != nil {
			continue
		}
		orig := filepath.Join(b.TempDir(), "original")
		if err := catalog.CopyWithGraph(bge, archive, "bge-small-en-v1.5.onnx", orig); err != nil {
			b.Fatal(err)
		}
		var ours, theirs float64
		for round := 0; round < 2; round++ {
			d, _ := embed(bge)
			ours += d
			d, _ = embed(orig)
			theirs += d
		}
		b.Logf("bge-small-en-v1.5: anna's graph %.1f docs/s, the langchain4j file %.1f docs/s: %.2fx", ours/2, theirs/2, ours/theirs)
		b.ReportMetric(ours/theirs, "bge_anna/langchain4j")
	}
}
