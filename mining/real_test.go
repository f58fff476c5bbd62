package mining

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/shareddata"
)

// realSetup indexes a shared BEIR set in a fresh engine with the real
// MiniLM encoder behind the shared embedding cache (so the corpus is
// embedded once per machine, not once per test run).
type realSetup struct {
	dir   string
	ds    *beir.Dataset
	eng   *engine.Engine
	enc   encoder.Encoder
	texts map[string]string // doc ID → EmbedText
}

func openReal(t testing.TB, name, split string) *realSetup {
	t.Helper()
	dir := shareddata.Path(t, "datasets", name)
	if _, err := home.RequireDefaultModel(); err != nil {
		t.Skipf("real model not installed: %v", err)
	}
	ctx := context.Background()
	ds, err := beir.Load(dir, split)
	if err != nil {
		t.Fatal(err)
	}
	ort, err := encoder.Default(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ort.Close() })
	cache, err := encoder.NewCache(ort, "")
	if err != nil {
		t.Fatal(err)
	}
	// Queries too go through the disk cache here, so reruns are cheap.
	enc, err := NewQueryMemo(cache, nil, 64)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(ctx, filepath.Join(t.TempDir(), "anna"), engine.Options{Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	for i := 0; i < len(ds.Corpus); i += 1024 {
		var batch []engine.Document
		for _, d := range ds.Corpus[i:min(i+1024, len(ds.Corpus))] {
			batch = append(batch, engine.Document(d))
		}
		if _, err := eng.Add(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	texts := map[string]string{}
	for _, d := range ds.Corpus {
		texts[d.ID] = engine.EmbedText(engine.Document(d))
	}
	return &realSetup{dir: dir, ds: ds, eng: eng, enc: enc, texts: texts}
}

func (r *realSetup) mine(t testing.TB, split string, opt Options, out string) *Stats {
	t.Helper()
	ctx := context.Background()
	teacher := &DenseTeacher{Enc: r.enc, Label: "dense:all-MiniLM-L6-v2", Vectors: StoredVectors(r.eng)}
	m, err := New(&EngineRetriever{E: r.eng, Mode: engine.ModeHybrid}, teacher, EngineCorpus{r.eng}, opt)
	if err != nil {
		t.Fatal(err)
	}
	src, err := OpenBEIR(ctx, r.dir, split, PromptDefaults{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	st, err := m.Run(ctx, src, out)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// checkMined checks a mined FlagEmbedding file line by line against the
// qrels: shape, scores for every pos and neg, no negative that is a known
// positive (by text), every negative at or below the margin threshold of
// its query's lowest positive, and the teacher's scores recomputed for a
// sample of lines.
func (r *realSetup) checkMined(t *testing.T, path string, st *Stats, margin float64, negatives int) {
	t.Helper()
	recs := readFlag(t, path)
	if len(recs) != st.Examples || len(recs) == 0 {
		t.Fatalf("%d lines, stats say %d examples", len(recs), st.Examples)
	}
	// Query text → texts of its positives.
	posTexts := map[string]map[string]bool{}
	for qid, rels := range r.ds.Qrels {
		q := r.ds.Queries[qid]
		if posTexts[q] == nil {
			posTexts[q] = map[string]bool{}
		}
		for id, g := range rels {
			if g > 0 {
				posTexts[q][normText(r.texts[id])] = true
			}
		}
	}
	anchor := map[string]float64{}
	for _, rec := range recs {
		if a, ok := anchor[rec.Query]; !ok || rec.PosScores[0] < a {
			anchor[rec.Query] = rec.PosScores[0]
		}
	}
	short, nneg := 0, 0
	for i, rec := range recs {
		line := i + 1
		if len(rec.Pos) != 1 || len(rec.PosScores) != 1 || len(rec.Neg) != len(rec.NegScores) || len(rec.Neg) == 0 || len(rec.Neg) > negatives {
			t.Fatalf("line %d: pos %d scores %d, neg %d scores %d", line, len(rec.Pos), len(rec.PosScores), len(rec.Neg), len(rec.NegScores))
		}
		if rec.Teacher != "dense:all-MiniLM-L6-v2" || rec.Type != "normal" || rec.Prompt != "" {
			t.Fatalf("line %d: teacher %q type %q prompt %q", line, rec.Teacher, rec.Type, rec.Prompt)
		}
		known := posTexts[rec.Query]
		if known == nil {
			t.Fatalf("line %d: query %q is not a judged query", line, rec.Query)
		}
		if !known[normText(rec.Pos[0])] {
			t.Fatalf("line %d: pos is not a judged positive of the query", line)
		}
		th := Threshold(anchor[rec.Query], margin)
		seen := map[string]bool{}
		for j, n := range rec.Neg {
			if known[normText(n)] {
				t.Errorf("line %d: negative %d is a known positive", line, j)
			}
			if normText(n) == normText(rec.Query) || seen[n] {
				t.Errorf("line %d: negative %d equals the query or repeats", line, j)
			}
			seen[n] = true
			if s := rec.NegScores[j]; math.IsNaN(s) || s > th {
				t.Errorf("line %d: negative %d scores %v above threshold %v (anchor %v)", line, j, s, th, anchor[rec.Query])
			}
		}
		if len(rec.Neg) < negatives {
			short++
		}
		nneg += len(rec.Neg)
	}
	// Short examples include those left unwritten for having no negative.
	if short+st.DroppedExamples != st.ShortExamples || nneg != st.Negatives {
		t.Errorf("file has %d short examples (+%d unwritten) / %d negatives; stats say %d / %d", short, st.DroppedExamples, nneg, st.ShortExamples, st.Negatives)
	}
	// The scores are the teacher's: recompute a few lines with a new
	// teacher, the query embedded again and each document found by its text
	// (a long document's score is its best passage's, so its stored passage
	// vectors are needed; the engine's tests check those against the model).
	ctx := context.Background()
	idOf := map[string]string{}
	for id, text := range r.texts {
		idOf[text] = id
	}
	doc := func(text string) Doc {
		id, ok := idOf[text]
		if !ok {
			t.Fatalf("mined text is no corpus document's: %.80q", text)
		}
		return Doc{ID: id, Text: text}
	}
	for i := 0; i < len(recs); i += max(1, len(recs)/8) {
		rec := recs[i]
		docs := []Doc{doc(rec.Pos[0])}
		for _, n := range rec.Neg {
			docs = append(docs, doc(n))
		}
		s, err := (&DenseTeacher{Enc: r.enc, Vectors: StoredVectors(r.eng)}).Score(ctx, Query{Text: rec.Query, Instruction: rec.Prompt}, docs)
		if err != nil {
			t.Fatal(err)
		}
		// From scratch, text only: the same score for every document the
		// engine embedded whole (one passage).
		texts := make([]Doc, len(docs))
		for j, d := range docs {
			texts[j] = Doc{Text: d.Text}
		}
		fresh, err := (&DenseTeacher{Enc: r.enc}).Score(ctx, Query{Text: rec.Query, Instruction: rec.Prompt}, texts)
		if err != nil {
			t.Fatal(err)
		}
		want := append([]float64{rec.PosScores[0]}, rec.NegScores...)
		for j := range s {
			if math.Abs(s[j]-want[j]) > 1e-5 {
				t.Errorf("line %d: score %d is %v, teacher recomputes %v", i+1, j, want[j], s[j])
			}
			v, _, err := r.eng.Teacher().Vectors(docs[j].ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(v) == 1 && math.Abs(fresh[j]-want[j]) > 1e-5 {
				t.Errorf("line %d: score %d is %v, embedding the text again gives %v", i+1, j, want[j], fresh[j])
			}
		}
	}
}

func TestMineSciFactTrain(t *testing.T) {
	if testing.Short() {
		t.Skip("indexes SciFact with the real model")
	}
	r := openReal(t, "scifact", "train")
	opt := DefaultOptions()
	opt.Seed = 7
	out := filepath.Join(t.TempDir(), "scifact-train.jsonl")
	st := r.mine(t, "train", opt, out)
	var sb strings.Builder
	st.Write(&sb)
	t.Logf("SciFact train:\n%s", sb.String())
	if st.Units != len(r.ds.Qrels) || st.BadUnits != 0 {
		t.Errorf("units %d bad %d, want %d queries", st.Units, st.BadUnits, len(r.ds.Qrels))
	}
	r.checkMined(t, out, st, opt.Margin, opt.Negatives)
	if st.DroppedMargin == 0 {
		t.Error("the margin dropped nothing on SciFact: suspicious")
	}
	// Reproducible: same seed with other parallelism → same bytes; another
	// seed → same counts, other negatives.
	opt.Workers = 4
	out2 := filepath.Join(t.TempDir(), "again.jsonl")
	r.mine(t, "train", opt, out2)
	if string(mustRead(t, out)) != string(mustRead(t, out2)) {
		t.Fatal("same seed, different output")
	}
	opt.Seed = 8
	out3 := filepath.Join(t.TempDir(), "seed8.jsonl")
	st3 := r.mine(t, "train", opt, out3)
	if st3.Negatives != st.Negatives || st3.ShortExamples != st.ShortExamples {
		t.Errorf("counts depend on the seed: %d/%d vs %d/%d", st3.Negatives, st3.ShortExamples, st.Negatives, st.ShortExamples)
	}
	if string(mustRead(t, out)) == string(mustRead(t, out3)) {
		t.Error("another seed gave the same negatives")
	}
}

func TestMineSquad2(t *testing.T) {
	if testing.Short() {
		t.Skip("indexes SQuAD paragraphs with the real model")
	}
	r := openReal(t, "squad2-dev-half", "dev")
	opt := DefaultOptions()
	opt.Seed = 3
	out := filepath.Join(t.TempDir(), "squad2.jsonl")
	st := r.mine(t, "dev", opt, out)
	var sb strings.Builder
	st.Write(&sb)
	t.Logf("SQuAD 2.0 dev-half:\n%s", sb.String())
	if st.Units != len(r.ds.Qrels) {
		t.Errorf("units %d, want %d", st.Units, len(r.ds.Qrels))
	}
	r.checkMined(t, out, st, opt.Margin, opt.Negatives)
	b, _ := json.Marshal(readFlag(t, out)[0])
	t.Logf("first line: %.400s", b)
}
