package benchmarks

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/internal/snippet"
)

// snippetProse is n bytes of ordinary prose: the Cranfield then SciFact
// corpora's titles and texts, one document a line, from the start again
// when n is more than both (9 MB).
func snippetProse(b *testing.B, n int) string {
	b.Helper()
	var sb strings.Builder
	for sb.Len() < n {
		for _, name := range []string{"cranfield", "scifact"} {
			path := shareddata.Path(b, "datasets", name, "corpus.jsonl")
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			err = beir.ReadCorpus(f, path, func(_ int, d beir.Doc) error {
				sb.WriteString(d.Title + " " + d.Text + "\n")
				if sb.Len() >= n {
					return errFull
				}
				return nil
			})
			f.Close()
			if err != nil && err != errFull {
				b.Fatal(err)
			}
			if sb.Len() >= n {
				break
			}
		}
	}
	return sb.String()[:n]
}

var errFull = fmt.Errorf("full")

// snippetRepetitive is n bytes of 15 distinct words, the text of issue #41
// (a log or a table reads the same): each query term some 39,000 times in
// 4 MB.
func snippetRepetitive(n int) string {
	words := strings.Fields("vortex shock wave flow pressure boundary layer mach number heat transfer wing body jet plate")
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		sb.WriteString(words[(i*7+i/15)%15])
		sb.WriteByte(' ')
	}
	return sb.String()[:n]
}

// BenchmarkSnippets times one lexical snippet (the default 200-byte
// fragment) of one document of 1 KB to 20 MB, ordinary prose or 15
// repeated words, for a query whose terms are all in the text ("vortex
// shock") and one with a term missing ("vortex zebra": nothing can stop
// the search early, it reads to snippet's limits). It calls Lexical, so
// the same file times the code before the bound (issue #41):
//
//	go test -run '^$' -bench Snippets -benchtime 1x ./benchmarks/
func BenchmarkSnippets(b *testing.B) {
	h, err := snippet.New()
	if err != nil {
		b.Fatal(err)
	}
	sizes := []struct {
		name string
		n    int
	}{{"1KB", 1 << 10}, {"10KB", 10 << 10}, {"100KB", 100 << 10}, {"1MB", 1 << 20}, {"4MB", 4 << 20}, {"20MB", 20 << 20}}
	if s := os.Getenv("ANNA_SNIPPET_MAX"); s != "" { // e.g. 1MB, for the old code
		for i, sz := range sizes {
			if sz.name == s {
				sizes = sizes[:i+1]
			}
		}
	}
	for _, kind := range []string{"prose", "repetitive"} {
		for _, sz := range sizes {
			var text string
			if kind == "prose" {
				text = snippetProse(b, sz.n)
			} else {
				text = snippetRepetitive(sz.n)
			}
			for _, q := range []string{"vortex shock", "vortex zebra"} {
				b.Run(fmt.Sprintf("%s/%s/%s", kind, sz.name, strings.ReplaceAll(q, " ", "_")), func(b *testing.B) {
					var s snippet.Snippet
					for b.Loop() {
						s, _ = h.Lexical(text, q, 0)
					}
					b.ReportMetric(float64(len(s.Highlights)), "highlights")
				})
			}
		}
	}
}
