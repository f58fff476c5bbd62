package recipe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/model"
)

// writeSet writes a small BEIR folder: n documents from a small
// vocabulary, and q queries for each of the train and test splits, each
// judged relevant to the document whose words it takes.
func writeSet(t *testing.T, dir string, n, q int) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "qrels"), 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(5))
	vocab := strings.Fields("graph search vector index neighbour query document model tensor layer token score rank fusion lexical dense hybrid recall precision cluster")
	var corpus, queries strings.Builder
	texts := make([]string, n)
	for i := range n {
		w := make([]string, 30)
		for j := range w {
			w[j] = fmt.Sprintf("%s%d", vocab[rng.Intn(len(vocab))], rng.Intn(50))
		}
		texts[i] = strings.Join(w, " ")
		b, _ := json.Marshal(map[string]string{"_id": fmt.Sprintf("d%02d", i), "title": fmt.Sprintf("document %d", i), "text": texts[i]})
		corpus.Write(append(b, '\n'))
	}
	for _, split := range []string{"train", "test"} {
		qrels := "query-id\tcorpus-id\tscore\n"
		for i := range q {
			id := fmt.Sprintf("%s%02d", split, i)
			d := (i*7 + len(split)) % n
			words := strings.Fields(texts[d])
			b, _ := json.Marshal(map[string]string{"_id": id, "text": strings.Join(words[i%5:i%5+5], " ")})
			queries.Write(append(b, '\n'))
			qrels += fmt.Sprintf("%s\td%02d\t1\n", id, d)
		}
		if err := os.WriteFile(filepath.Join(dir, "qrels", split+".tsv"), []byte(qrels), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, s := range map[string]string{"corpus.jsonl": corpus.String(), "queries.jsonl": queries.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tinyConfig is the recipe on a tiny budget: a 2-layer random BERT with
// MiniLM's vocabulary as base, 4 steps of 2 queries × 3 candidates × 32
// tokens, top 10 measured; the embedder is the installed default model.
func tinyConfig(t *testing.T, data, work string) Config {
	t.Helper()
	emb, err := home.RequireDefaultModel()
	if err != nil {
		t.Skipf("default model not installed (run make setup): %v", err)
	}
	mc := testmodels.MiniLMVocab(testmodels.BERT())
	c := Defaults()
	c.Data, c.Work, c.Name, c.Embedder = data, work, "rr", emb
	c.Base = testmodels.Checkpoint(t, mc, bert.RandomTensors(mc, false, 0.02, 7))
	c.ModelsDir, c.DownloadsDir, c.EmbeddingCache = t.TempDir(), t.TempDir(), filepath.Join(filepath.Dir(work), "cache")
	c.Steps, c.BatchQueries, c.Group, c.MaxLength, c.LR, c.CheckpointEvery, c.EvalEvery, c.Depth = 4, 2, 3, 32, 1e-3, 1, 2, 10
	return c
}

// events records the Progress a build sends.
type events struct {
	mu  sync.Mutex
	all []Progress
}

func (e *events) add(p Progress) { e.mu.Lock(); e.all = append(e.all, p); e.mu.Unlock() }

// first is the first event whose stage has the prefix and that counts unit.
func (e *events) first(prefix, unit string) (Progress, bool) {
	for _, p := range e.all {
		if strings.HasPrefix(p.Stage, prefix) && p.Unit == unit {
			return p, true
		}
	}
	return Progress{}, false
}

func checkpointStep(t *testing.T, work string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(work, "ce", "checkpoint", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Step int `json:"step"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st.Step
}

// TestBuildResumes: a build cancelled during training, then during the
// measurement, goes on each time from where it stopped — training from its
// checkpoint's step, not step 1; mining not again; the pairs already
// scored not again — and ends with the measurements an uninterrupted
// build records.
func TestBuildResumes(t *testing.T) {
	tmp := t.TempDir()
	data := writeSet(t, filepath.Join(tmp, "set"), 30, 12)

	whole := tinyConfig(t, data, filepath.Join(tmp, "whole"))
	var ev events
	whole.Progress = ev.add
	want, err := Build(context.Background(), whole)
	if err != nil {
		t.Fatal(err)
	}
	man, err := model.LoadManifest(want.Installed)
	if err != nil {
		t.Fatal(err)
	}
	if man.Task != model.TaskRerank || len(want.Measured) != 4 || len(man.Measured) != 4 || want.Steps != 4 || want.Installed != filepath.Join(whole.ModelsDir, "rr") {
		t.Fatalf("installed %s: task %q, %d measurements (result %d), %d steps", want.Installed, man.Task, len(man.Measured), len(want.Measured), want.Steps)
	}
	// Each stage counted its work and, after its first unit, timed it.
	if p, ok := ev.first("train", "steps"); !ok || p.Done != 1 || p.Total != 4 || p.PerUnit != 0 {
		t.Fatalf("first training report %+v (found %v): want step 1 of 4, not yet timed", p, ok)
	}
	timed := false
	for _, p := range ev.all {
		if p.Stage == "train" && p.Done == 2 {
			timed = p.PerUnit > 0 && p.ETA == 2*p.PerUnit
		}
	}
	if !timed {
		t.Fatal("the second step's report has no measured time per step, or its ETA is not the 2 steps left at that rate")
	}

	part := tinyConfig(t, data, filepath.Join(tmp, "part"))
	part.Base = whole.Base
	ctx, cancel := context.WithCancel(context.Background())
	part.Progress = func(p Progress) {
		if p.Stage == "train" && p.Done == 2 {
			cancel()
		}
	}
	if _, err := Build(ctx, part); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `stage "train"`) {
		t.Fatalf("cancelled during training: %v", err)
	}
	if s := checkpointStep(t, part.Work); s != 2 {
		t.Fatalf("checkpoint at step %d after a cancel at step 2", s)
	}

	// Again: training goes on at step 3; cancelled once pairs are scored.
	ev = events{}
	ctx, cancel = context.WithCancel(context.Background())
	part.Progress = func(p Progress) {
		ev.add(p)
		if strings.HasSuffix(p.Stage, ": rerank") && p.Done > 0 {
			cancel()
		}
	}
	if _, err := Build(ctx, part); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "measure set test") {
		t.Fatalf("cancelled during the measurement: %v", err)
	}
	if p, ok := ev.first("train", "steps"); !ok || p.Done != 3 {
		t.Fatalf("resumed training first reported %+v (found %v): want step 3, continuing the checkpoint", p, ok)
	}
	if p, ok := ev.first("mine", "queries"); ok {
		t.Fatalf("mining ran again: %+v", p)
	}
	scored, _ := filepath.Glob(filepath.Join(part.Work, "scores-set-*.txt"))
	if len(scored) != 1 {
		t.Fatalf("score files %v", scored)
	}
	b, err := os.ReadFile(scored[0])
	if err != nil || len(b) == 0 {
		t.Fatalf("no pair scored before the cancel: %v", err)
	}
	had := strings.Count(string(b), "\n")

	ev = events{}
	part.Progress = ev.add
	got, err := Build(context.Background(), part)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := ev.first("train", "steps"); ok {
		t.Fatalf("training ran again: %+v", p)
	}
	if p, ok := ev.first("measure", "pairs"); !ok || p.Done != had || p.Total <= had {
		t.Fatalf("resumed measurement first reported %+v (found %v): want the %d pairs scored before, of more", p, ok, had)
	}
	if len(got.Measured) != len(want.Measured) {
		t.Fatalf("measured %+v, uninterrupted %+v", got.Measured, want.Measured)
	}
	for i, x := range got.Measured {
		y := want.Measured[i]
		// Equal scores; the means may differ in the last bit (eval sums
		// the queries in map order).
		if math.Abs(x.Before-y.Before) > 1e-12 || math.Abs(x.After-y.After) > 1e-12 || x.Candidates != y.Candidates || x.Fusion != y.Fusion {
			t.Fatalf("measurement %d: resumed %+v, uninterrupted %+v", i, x, y)
		}
	}

	// Other settings in the same work directory are refused, by name.
	part.Steps = 5
	if _, err := Build(context.Background(), part); err == nil || !strings.Contains(err.Error(), "Steps 4") {
		t.Fatalf("another step count in the same work directory: %v", err)
	}
}

// TestCheckDataSaysWhatIsNeeded: without the collection, the error names
// the missing file, the layout and where SciFact comes from.
func TestCheckDataSaysWhatIsNeeded(t *testing.T) {
	dir := t.TempDir()
	err := CheckData(dir, true)
	if !errors.Is(err, ErrData) || !strings.Contains(err.Error(), filepath.Join(dir, "corpus.jsonl")) ||
		!strings.Contains(err.Error(), "qrels/train.tsv") || !strings.Contains(err.Error(), "scifact.zip") {
		t.Fatalf("no collection: %v", err)
	}
	c := Defaults()
	c.Data = dir
	if _, err := Build(context.Background(), c); !errors.Is(err, ErrData) {
		t.Fatalf("Build without the collection: %v", err)
	}
	data := writeSet(t, filepath.Join(dir, "set"), 4, 1)
	os.Remove(filepath.Join(data, "qrels", "test.tsv"))
	if err := CheckData(data, true); err == nil || !strings.Contains(err.Error(), filepath.Join("qrels", "test.tsv")) {
		t.Fatalf("no test split, measuring: %v", err)
	}
	if err := CheckData(data, false); err != nil {
		t.Fatalf("no test split, not measuring: %v", err)
	}
}

// countReranker scores a pair by its lengths, counting the pairs.
type countReranker struct{ pairs int }

func (c *countReranker) Score(_ context.Context, q string, docs []string) ([]float32, error) {
	c.pairs += len(docs)
	out := make([]float32, len(docs))
	for i, d := range docs {
		out[i] = float32(len(q))/7 + float32(len(d))
	}
	return out, nil
}

// TestScoresResumeAfterATornLine: the pairs scored are read back bit for
// bit and not scored again; a last line cut by a kill is dropped (and
// rewritten); a damaged line elsewhere is an error naming the line.
func TestScoresResumeAfterATornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scores.txt")
	rr := &countReranker{}
	s, err := openScores(path, rr)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Score(context.Background(), "q", []string{"a", "bb", "ccc"})
	if err != nil {
		t.Fatal(err)
	}
	s.close()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("0123abcd") // a torn line
	f.Close()
	if s, err = openScores(path, rr); err != nil {
		t.Fatal(err)
	}
	again, err := s.Score(context.Background(), "q", []string{"ccc", "a", "dddd"})
	if err != nil {
		t.Fatal(err)
	}
	s.close()
	if rr.pairs != 4 || again[0] != first[2] || again[1] != first[0] {
		t.Fatalf("%d pairs scored (want 3, then dddd alone); scores %v then %v", rr.pairs, first, again)
	}
	b, _ := os.ReadFile(path)
	if lines := strings.Split(string(b), "\n"); len(lines) != 5 || lines[4] != "" {
		t.Fatalf("file after the torn line was cut: %q", b)
	}
	os.WriteFile(path, []byte("zz 3f800000\n"+string(b)), 0o644)
	if _, err := openScores(path, rr); err == nil || !strings.Contains(err.Error(), path+":1") {
		t.Fatalf("damaged first line: %v", err)
	}
}
