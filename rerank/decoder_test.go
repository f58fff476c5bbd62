package rerank

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/model/onnx"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/internal/train/decoder"
	"github.com/anna-search/anna/model"
)

// A decoder reranker (the yes/no logit form): a tiny random Llama with tied
// embeddings, imported with task rerank and a prompt of its own, scores
// each pair as the trainer's forward of the prompt's ids computes it —
// (E[yes] − E[no]) · h at the last token — with the prompt laid out by hand
// here (prefix, the filled body cut from the right, suffix).
func TestDecoderReranker(t *testing.T) {
	needORT(t)
	src := minilm(t) // for its tokenizer and ONNX Runtime
	cfg := testmodels.MiniLMVocab(testmodels.Decoder("llama"))
	cfg.TieWordEmbeddings = true
	tensors := decoder.RandomTensors(cfg, 0.2, 3)
	pp := &model.PairPrompt{Prefix: "judge the pair:", Body: "query: {query} document: {document}", Suffix: "relevant?", Labels: []string{"no", "yes"}}
	dir := filepath.Join(t.TempDir(), "reranker")
	const maxLen = 24
	man, err := onnx.WriteDir(context.Background(), dir, cfg, nil, tensors, src.tok, onnx.Settings{Task: model.TaskRerank, MaxLength: maxLen, PairPrompt: pp})
	if err != nil {
		t.Fatal(err)
	}
	if man.NumLabels != 2 || man.PairPrompt == nil || man.PairPrompt.Body != pp.Body {
		t.Fatalf("manifest %+v", man)
	}
	r, err := Load(context.Background(), dir, Options{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	query := "what do {document} braces do"
	docs := []string{"a short document", strings.Repeat("a long document that must be cut to fit the prompt ", 6), "x"}
	got, err := r.Score(context.Background(), query, docs)
	if err != nil {
		t.Fatal(err)
	}

	tok, err := tokenizer.Load(src.tok)
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	m, err := decoder.New(cfg, tensors)
	if err != nil {
		t.Fatal(err)
	}
	emb := tensors["embed_tokens.weight"].Data
	no, yes := tok.IDs("no")[0], tok.IDs("yes")[0]
	prefix, suffix := tok.IDs(pp.Prefix), tok.IDs(pp.Suffix)
	for i, d := range docs {
		body := tok.IDs("query: " + query + " document: " + d) // the query's braces are text
		if n := maxLen - len(prefix) - len(suffix); len(body) > n {
			body = body[:n]
		}
		ids := append(append(append([]int64{}, prefix...), body...), suffix...)
		if i == 1 && len(ids) != maxLen {
			t.Fatalf("the long pair is %d tokens, want %d", len(ids), maxLen)
		}
		b := &decoder.Batch{N: 1, T: len(ids), IDs: make([]int32, len(ids)), Mask: make([]float32, len(ids))}
		for j, id := range ids {
			b.IDs[j], b.Mask[j] = int32(id), 1
		}
		a, err := m.Forward(b)
		if err != nil {
			t.Fatal(err)
		}
		h := a.Hidden[(len(ids)-1)*32 : len(ids)*32]
		var want float64
		for c, x := range h {
			want += float64(x) * float64(emb[int(yes)*32+c]-emb[int(no)*32+c])
		}
		t.Logf("pair %d (%d tokens): score %.5f, trainer %.5f", i, len(ids), got[i], want)
		if math.Abs(float64(got[i])-want) > 1e-4 {
			t.Errorf("pair %d: score %.6f, want %.6f", i, got[i], want)
		}
	}
}
