package doc2query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/gguf/gguftest"
	"github.com/anna-search/anna/internal/model/llama"
	"github.com/anna-search/anna/internal/reftest"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/model"
)

// tinyGenerator is a random decoder over the default model's WordPiece
// vocabulary: nonsense queries, but real tokens, decoding and stops — what
// Run's bookkeeping needs.
func tinyGenerator(t *testing.T) *Generator {
	t.Helper()
	dir, err := home.RequireDefaultModel()
	if err != nil {
		t.Skip(err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tok.Close() })
	cfg := &model.Config{ModelType: "llama", VocabSize: 30522, HiddenSize: 16, NumHiddenLayers: 2, NumAttentionHeads: 2,
		NumKeyValueHeads: 1, IntermediateSize: 24, MaxPositionEmbeddings: 512, HiddenAct: "silu", RMSNormEps: 1e-6, RopeTheta: 10000}
	m, err := llama.New(cfg, llama.RandomTensors(cfg, 0.5, 3))
	if err != nil {
		t.Fatal(err)
	}
	return &Generator{m: m, tok: tok, system: "sys", stop: []int32{102}} // [SEP]
}

func writeCorpus(t *testing.T, dir string, n int) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"_id": "d%d", "title": "title %d", "text": "some text about topic %d and other words"}`+"\n", i, i, i)
	}
	b.WriteString(`{"_id": "empty", "title": "", "text": " "}` + "\n")
	if err := os.WriteFile(filepath.Join(dir, "corpus.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRunResumes: a run stopped after its first batch (its context
// cancelled) and then cut in the middle of a line (a torn write), run again,
// writes exactly what an uninterrupted run writes; the output is a BEIR
// folder whose qrels judge each query to its document; --docs takes a
// seeded sample; an empty document gets no query; a file it did not write
// is refused, naming its line.
func TestRunResumes(t *testing.T) {
	g := tinyGenerator(t)
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	writeCorpus(t, src, 9)
	o := Options{Docs: 7, PerDoc: 2, MaxNew: 6, Temperature: 1, Seed: 3, Batch: 3}
	whole := filepath.Join(tmp, "whole")
	if err := Run(context.Background(), g, src, whole, o); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(beir.QueriesPath(whole))

	cut := filepath.Join(tmp, "cut")
	ctx, cancel := context.WithCancel(context.Background())
	oc := o
	oc.Progress = func(done, total int) {
		if done >= 3 {
			cancel()
		}
	}
	if err := Run(ctx, g, src, cut, oc); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	f, _ := os.OpenFile(beir.QueriesPath(cut), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"_id": "gq0-d`)
	f.Close()
	if err := Run(context.Background(), g, src, cut, o); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(beir.QueriesPath(cut))
	if string(got) != string(want) {
		t.Fatalf("resumed run wrote\n%s\nthe uninterrupted one\n%s", got, want)
	}

	ds, err := beir.Load(cut, Split)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(got)), "\n") {
		var q line
		if err := json.Unmarshal([]byte(l), &q); err != nil {
			t.Fatal(err)
		}
		if ds.Queries[q.ID] != q.Text || ds.Qrels[q.ID][q.Doc] != 1 || len(ds.Qrels[q.ID]) != 1 {
			t.Fatalf("query %s: qrels %v, text %q", q.ID, ds.Qrels[q.ID], ds.Queries[q.ID])
		}
		docs[q.Doc] = true
	}
	if len(docs) != 7 || docs["empty"] || len(ds.Corpus) != 10 {
		t.Fatalf("queries for %d documents (%v), corpus of %d: want 7, not the empty one, the source's 10", len(docs), docs, len(ds.Corpus))
	}
	os.WriteFile(beir.QueriesPath(cut), []byte(`{"_id": "q1", "text": "a query"}`+"\n"), 0o644)
	if err := Run(context.Background(), g, src, cut, o); err == nil || !strings.Contains(err.Error(), "queries.jsonl:1") {
		t.Fatalf("a queries.jsonl it did not write: %v", err)
	}
}

// TestPrompt: the prompt is the chat's system turn, each example as a user
// turn and the assistant's answer, then the document's user turn, cut to
// MaxDocTokens, and the opening of the assistant's turn.
func TestPrompt(t *testing.T) {
	g := tinyGenerator(t)
	o := Options{Instruction: "write a query", MaxDocTokens: 3, ExampleDocTokens: 2, Examples: []Example{{Doc: "alpha beta gamma", Query: "ab"}}}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	ids := g.prompt("one two three four five", o)
	ids64 := make([]int64, len(ids))
	for i, id := range ids {
		ids64[i] = int64(id)
	}
	want := g.tok.IDs("<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nwrite a query\n\nalpha beta<|im_end|>\n<|im_start|>assistant\nab<|im_end|>\n" +
		"<|im_start|>user\nwrite a query\n\none two three<|im_end|>\n<|im_start|>assistant\n")
	if fmt.Sprint(ids64) != fmt.Sprint(want) {
		t.Fatalf("prompt %q\nwant   %q", g.tok.Decode(ids64, false), g.tok.Decode(want, false))
	}
}

// generateRef is transformers' prompts and greedy tokens for SmolLM2
// (tools/gguf_reference.py generate), committed.
var generateRef = reftest.Suite{Golden: "testdata/smollm2_generate.golden", Tool: "gguf_reference.py",
	Imports: []string{"transformers", "gguf", "torch"}, Outputs: []string{"out.json"}}

// TestSmolLM2MatchesTransformers: for SmolLM2-135M-Instruct from its GGUF
// file, the prompt (a few-shot example, then a document) is the token ids
// transformers' chat template gives the same messages, and greedy decoding
// writes the tokens transformers' generate writes (float32, up to the end
// of the turn), read from the golden file tools/gguf_reference.py wrote
// (internal/reftest). Needs the downloaded file.
func TestSmolLM2MatchesTransformers(t *testing.T) {
	dir := t.TempDir()
	path := gguftest.SmolLM2(t, dir)
	g, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	o := Options{Instruction: DefaultInstruction, MaxNew: 24, Temperature: 0, Examples: []Example{{Doc: "Tides are caused mainly by the gravity of the Moon.", Query: "what causes tides"}}}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	docs := []beir.Doc{
		{ID: "a", Title: "Vitamin D", Text: "Vitamin D deficiency is associated with a higher risk of bone fractures in older adults."},
		{ID: "b", Text: "HNSW builds a layered proximity graph for approximate nearest neighbour search over vectors."},
	}
	var chats [][]map[string]string
	for _, d := range docs {
		chats = append(chats, []map[string]string{
			{"role": "user", "content": o.Instruction + "\n\n" + o.Examples[0].Doc},
			{"role": "assistant", "content": o.Examples[0].Query},
			{"role": "user", "content": o.Instruction + "\n\n" + docText(d)},
		})
	}
	ref := t.TempDir() // the reference's inputs, then its out.json
	reftest.WriteJSON(t, ref, map[string]any{"in.json": map[string]any{"chats": chats, "max_new": o.MaxNew}})
	gguftest.WriteID(t, ref)
	suite := generateRef
	suite.Args = func(dirs []string) []string {
		return []string{"generate", path, filepath.Join(dirs[0], "in.json"), filepath.Join(dirs[0], "out.json")}
	}
	suite.Reference(t, []reftest.Case{{Name: "smollm2", Dir: ref}})
	var want []struct {
		Prompt []int32 `json:"prompt"`
		New    []int32 `json:"new"`
		EOS    int32   `json:"eos"`
	}
	raw, _ := os.ReadFile(filepath.Join(ref, "out.json"))
	if err := json.Unmarshal(raw, &want); err != nil || len(want) != len(docs) {
		t.Fatalf("reference: %v (%d answers for %d documents)", err, len(want), len(docs))
	}
	for i, d := range docs {
		p := g.prompt(docText(d), o)
		if fmt.Sprint(p) != fmt.Sprint(want[i].Prompt) {
			t.Fatalf("document %s: prompt ids\n%v\ntransformers' chat template\n%v", d.ID, p, want[i].Prompt)
		}
	}
	// Through Queries' path: the shared prefix fed once, each document's turn after it.
	var turns [][]int32
	for _, d := range docs {
		turns = append(turns, g.turn(docText(d), o))
	}
	gen, err := g.m.Generate(context.Background(), turns, llama.GenerateOptions{Prefix: g.prefix(o), MaxNew: o.MaxNew, Stop: g.stop})
	if err != nil {
		t.Fatal(err)
	}
	for i := range docs {
		wantNew := want[i].New
		if n := len(wantNew); n > 0 && slices.Contains(g.stop, wantNew[n-1]) {
			wantNew = wantNew[:n-1]
		}
		ids := make([]int64, len(gen[i]))
		for j, id := range gen[i] {
			ids[j] = int64(id)
		}
		if !slices.Equal(gen[i], wantNew) {
			t.Fatalf("document %s: greedy %v (%q), transformers %v", docs[i].ID, gen[i], g.tok.Decode(ids, true), wantNew)
		}
		t.Logf("document %s: %q", docs[i].ID, g.tok.Decode(ids, true))
	}
}

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"  Query: \"what causes tides\"\nmore":                                "what causes tides",
		"\n\nVitamin D lowers fracture risk. It was studied in 2,000 adults.": "Vitamin D lowers fracture risk.",
		"Is HNSW exact? No, it is approximate.":                               "Is HNSW exact?",
		"a claim with e.g.no space":                                           "a claim with e.g.no space",
		"   \n ":                                                              "",
	} {
		if got := clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
}
