package adapt

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
)

// letterEncoder is a bad student: a text's letter counts, 26 dimensions,
// normalised.
type letterEncoder struct{}

func (letterEncoder) EmbedDocuments(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, s := range texts {
		v := make([]float32, 26)
		var n float64
		for _, r := range strings.ToLower(s) {
			if r >= 'a' && r <= 'z' {
				v[r-'a']++
				n++
			}
		}
		for j := range v {
			v[j] /= float32(math.Max(n, 1))
		}
		out[i] = v
	}
	return out, nil
}

func (e letterEncoder) EmbedQueries(ctx context.Context, q []string, _ encoder.Prompt) ([][]float32, error) {
	return e.EmbedDocuments(ctx, q)
}
func (letterEncoder) Dim() int            { return 26 }
func (letterEncoder) Fingerprint() string { return "letters" }

// TestCorpusCheck: the whole-corpus check scores the index's own model as
// itself (equal scores, the stored vectors against embedding) and far
// above a bad student, and keeps the student's vectors for the reindex.
func TestCorpusCheck(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	index := tinyIndex(t, filepath.Join(tmp, "idx"), 30)
	c := tinyConfig(t, index, filepath.Join(tmp, "work"), "")
	c.TeacherModels = []string{home.DefaultModel()}
	r := &run{cfg: c}
	if err := r.cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if err := r.open(); err != nil {
		t.Fatal(err)
	}
	eng, err := r.openIndex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	docs, err := eng.Get(ctx, "d00", "d03", "d07", "d11", "d19", "d25")
	if err != nil {
		t.Fatal(err)
	}
	held := firstSentenceQueries(docs)
	if err := os.WriteFile(r.path("heldout.jsonl"), held, 0o644); err != nil {
		t.Fatal(err)
	}
	baseEnc, err := eng.Teacher().LoadEncoder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	same, err := encoder.Load(ctx, home.DefaultModel(), encoder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer same.Close()
	sc, err := encoder.NewCache(same, r.path("student-vectors"))
	if err != nil {
		t.Fatal(err)
	}
	qs, err := r.heldQueries()
	if err != nil {
		t.Fatal(err)
	}
	self, err := r.corpusCheck(ctx, eng, baseEnc, sc, qs, true)
	if err != nil {
		t.Fatal(err)
	}
	b, s, n := self.Base, self.Student, len(qs)
	t.Logf("the index's model as the student: %+v on %d queries (%d stored vectors read)", self, n, r.storedHits)
	if n != len(docs) || b < 0.3 || math.Abs(b-s) > 1e-9 || r.storedHits == 0 ||
		self.BaseHybrid < 0.3 || math.Abs(self.BaseHybrid-self.StudentHybrid) > 1e-9 {
		t.Fatalf("the index's model against itself: %+v on %d queries, %d stored vectors read", self, n, r.storedHits)
	}
	again, err := encoder.NewCache(same, r.path("student-vectors"))
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := eng.Teacher().IDs(ctx)
	all, _ := eng.Get(ctx, ids...)
	var texts []string
	for _, d := range all {
		texts = append(texts, engine.EmbedText(d))
	}
	if _, err := again.EmbedDocuments(ctx, texts); err != nil || again.Misses() != 0 {
		t.Fatalf("the reindex would embed %d documents again (%v): the check's student vectors are not kept", again.Misses(), err)
	}
	letters, err := r.corpusCheck(ctx, eng, baseEnc, letterEncoder{}, qs, true)
	if err != nil {
		t.Fatal(err)
	}
	// BM25 props up the letter counter's hybrid: lower, not as far down
	if letters.Student > b-0.2 || letters.StudentHybrid >= letters.BaseHybrid {
		t.Fatalf("a letter-count student scored %+v: want it well below the index's model", letters)
	}
	t.Logf("a letter-count student: %+v", letters)

	// Judged queries: the same queries, their document the one relevant.
	r.cfg.Judged = filepath.Join(tmp, "judged.jsonl")
	if err := os.WriteFile(r.cfg.Judged, held, 0o644); err != nil {
		t.Fatal(err)
	}
	jq, err := r.judgedQueries(ctx, eng)
	if err != nil || len(jq) != len(docs) {
		t.Fatalf("judged queries: %d, %v", len(jq), err)
	}
	judged, err := r.corpusCheck(ctx, eng, baseEnc, letterEncoder{}, jq, false)
	if err != nil {
		t.Fatal(err)
	}
	jb, js := judged.Base, judged.Student
	t.Logf("judged: the index's model %.4f, a letter-count student %.4f", jb, js)
	if jb < 0.3 || js > jb-0.1 {
		t.Fatalf("judged: the index's model %.4f, a letter-count student %.4f", jb, js)
	}
	for _, bad := range []struct{ line, want string }{
		{`{"query": "graph", "pos_ids": ["nope"]}`, `judged.jsonl:2: document "nope" is not in the index`},
		{`{"query": "graph", "pos": ["some text"]}`, "judged.jsonl:2: a judged query's positives must be the index's document IDs"},
		{`{"query": "graph", "pos_ids": [`, "judged.jsonl:2"},
	} {
		first := strings.SplitAfter(string(held), "\n")[0]
		if err := os.WriteFile(r.cfg.Judged, []byte(first+bad.line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := r.judgedQueries(ctx, eng); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("judged file with %s: %v; want %q", bad.line, err, bad.want)
		}
	}
}

// TestExtractiveCheck: the queries the check adds to a small held-out
// slice are the extractive pseudo-queries of every tenth document, in ID
// order, at most the limit.
func TestExtractiveCheck(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	index := tinyIndex(t, filepath.Join(tmp, "idx"), 30)
	eng, err := engine.Open(ctx, index, engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	docs, err := eng.Get(ctx, "d09", "d19", "d29")
	if err != nil || len(docs) != 3 {
		t.Fatalf("%v, %d documents", err, len(docs))
	}
	for _, limit := range []int{100, 2} {
		qs, err := extractiveCheck(ctx, eng, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(qs) != min(3, limit) {
			t.Fatalf("limit %d: %d queries, want %d", limit, len(qs), min(3, limit))
		}
		for i, q := range qs {
			if want := PseudoQuery(docs[i]); q.Text != want || q.Rels != nil {
				t.Fatalf("query %d: %+v, want %q judged by the teacher", i, q, want)
			}
		}
	}
	// withExtractive adds them below minCheckQueries held out, not at it
	for _, held := range []int{minCheckQueries - 1, minCheckQueries} {
		qs, added, err := withExtractive(ctx, eng, make([]checkQuery, held))
		if want := map[bool]int{true: 3, false: 0}[held < minCheckQueries]; err != nil || added != want || len(qs) != held+want {
			t.Fatalf("%d held out: %d queries, %d added, %v; want %d added", held, len(qs), added, err, want)
		}
	}
}
