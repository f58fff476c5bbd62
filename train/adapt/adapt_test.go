package adapt

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/testmodels"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/model"
)

// tinyIndex indexes n documents from a small vocabulary with the installed
// default model: each a first sentence of 8 words, then 22 more.
func tinyIndex(t *testing.T, dir string, n int) string {
	t.Helper()
	emb, err := home.RequireDefaultModel()
	if err != nil {
		t.Skipf("default model not installed (run make setup): %v", err)
	}
	return tinyIndexWith(t, dir, n, emb)
}

// tinyIndexWith is tinyIndex with the model in emb.
func tinyIndexWith(t *testing.T, dir string, n int, emb string) string {
	t.Helper()
	ctx := context.Background()
	eng, err := engine.Open(ctx, dir, engine.Options{Model: emb})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(3))
	vocab := strings.Fields("graph search vector index neighbour query document model tensor layer token score rank fusion lexical dense hybrid recall precision cluster")
	word := func() string { return fmt.Sprintf("%s%d", vocab[rng.Intn(len(vocab))], rng.Intn(40)) }
	var docs []engine.Document
	for i := range n {
		w := make([]string, 30)
		for j := range w {
			w[j] = word()
		}
		docs = append(docs, engine.Document{ID: fmt.Sprintf("d%02d", i), Title: fmt.Sprintf("doc %d", i),
			Text: strings.Join(w[:8], " ") + ". " + strings.Join(w[8:], " ")})
	}
	if _, err := eng.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tinyBase writes the student tinyConfig trains, a 2-layer random BERT
// with MiniLM's vocabulary, and returns its checkpoint directory;
// positions > 0 sets its max_position_embeddings.
func tinyBase(t *testing.T, positions int) string {
	t.Helper()
	mc := testmodels.MiniLMVocab(testmodels.BERT())
	if positions > 0 {
		mc.MaxPositionEmbeddings = positions
	}
	return testmodels.Checkpoint(t, mc, bert.RandomTensors(mc, false, 0.02, 7))
}

// tinyConfig adapts index with a 2-layer random BERT (MiniLM's vocabulary)
// as the student: 4 steps of 2 queries × 3 candidates × 32 tokens.
func tinyConfig(t *testing.T, index, work, base string) Config {
	c := Defaults()
	c.Index, c.Work, c.Base = index, work, base
	c.Steps, c.BatchQueries, c.Group, c.MaxLength, c.LR, c.CheckpointEvery = 4, 2, 3, 32, 1e-3, 1
	return c
}

type events struct {
	mu  sync.Mutex
	all []Progress
}

func (e *events) add(p Progress) { e.mu.Lock(); e.all = append(e.all, p); e.mu.Unlock() }

func (e *events) first(stage, unit string) (Progress, bool) {
	for _, p := range e.all {
		if p.Stage == stage && p.Unit == unit {
			return p, true
		}
	}
	return Progress{}, false
}

// TestAdaptResumesAndRefuses: an adapt cancelled during training goes on
// from its checkpoint (not step 1, mining not again) and reindexes the
// index with the student; a run whose held-out check cannot pass (a gain
// above nDCG's maximum required) refuses and leaves the index's model.
func TestAdaptResumesAndRefuses(t *testing.T) {
	tmp := t.TempDir()
	base := tinyBase(t, 512) // as MiniLM's: the import path would serve it at 512
	index := tinyIndex(t, filepath.Join(tmp, "idx"), 30)
	before, err := engine.RecordedModel(index)
	if err != nil {
		t.Fatal(err)
	}

	// Refused: the index keeps its model.
	refuse := tinyConfig(t, index, filepath.Join(tmp, "refuse"), base)
	refuse.MinGain = 1.01
	rep, err := Adapt(context.Background(), refuse)
	if !errors.Is(err, ErrWorse) || rep.Reindexed || rep.CheckQueries == 0 {
		t.Fatalf("a check that cannot pass: report %+v, error %v; want ErrWorse after scoring held-out queries", rep, err)
	}
	if m, err := engine.RecordedModel(index); err != nil || m.Fingerprint != before.Fingerprint {
		t.Fatalf("after a refusal the index's model is %+v (%v), was %+v", m, err, before)
	}

	// Cancelled at training step 2, then resumed.
	c := tinyConfig(t, index, filepath.Join(tmp, "work"), base)
	c.Logf = t.Logf
	c.MinGain = -1 // any student passes: this part tests the stages, not the gain
	c.Queries = filepath.Join(tmp, "queries.log")
	if err := os.WriteFile(c.Queries, []byte("graph3 search\n\nvector7 index2 rank\ntoken fusion\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var ev events
	c.Progress = func(p Progress) {
		ev.add(p)
		if p.Stage == "train" && p.Done == 2 {
			cancel()
		}
	}
	if _, err := Adapt(ctx, c); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `stage "train"`) {
		t.Fatalf("cancelled during training: %v", err)
	}
	if p, ok := ev.first("mine", "queries (train.jsonl)"); !ok || p.Total < 10 {
		t.Fatalf("first mining report %+v (found %v): want the training queries counted", p, ok)
	}
	ev = events{}
	c.Progress = ev.add
	rep, err = Adapt(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := ev.first("train", "steps"); !ok || p.Done != 3 {
		t.Fatalf("resumed training first reported %+v (found %v): want step 3, continuing the checkpoint", p, ok)
	}
	for _, p := range ev.all {
		if p.Stage == "queries" || p.Stage == "mine" {
			t.Fatalf("a finished stage ran again: %+v", p)
		}
	}
	// 30 documents' first sentences and the log's 3 queries.
	if !rep.Reindexed || rep.Steps != 4 || rep.Queries+rep.HeldOut != 33 || rep.HeldOut != 3 || rep.Examples == 0 || rep.Estimate <= 0 {
		t.Fatalf("report %+v", rep)
	}
	after, err := engine.RecordedModel(index)
	if err != nil || after.Fingerprint == before.Fingerprint || filepath.Clean(after.Dir) != filepath.Clean(rep.Model) ||
		rep.Precision != "" || rep.Served != rep.Model {
		t.Fatalf("index model after adapt %+v (%v), student %s", after, err, rep.Model)
	}
	// The served student is the trained one mixed half-way with its start.
	mixed, err1 := bert.LoadModel(filepath.Join(filepath.Dir(rep.Model), "hf"), false, 1)
	trained, err2 := bert.LoadModel(filepath.Join(filepath.Dir(rep.Trained), "hf"), false, 1)
	start, err3 := bert.LoadModel(base, false, 1)
	if err := errors.Join(err1, err2, err3); err != nil || rep.Trained == rep.Model {
		t.Fatalf("served %s, trained %s: %v", rep.Model, rep.Trained, err)
	}
	for _, p := range mixed.Params {
		tw, sw := trained.Param(p.Name).W, start.Param(p.Name).W
		for i, w := range p.W {
			if want := sw[i] + 0.5*(tw[i]-sw[i]); w != want {
				t.Fatalf("served %s[%d] = %v, want %v (trained %v, start %v)", p.Name, i, w, want, tw[i], sw[i])
			}
		}
	}
	// The student is served at the length the index's model was (MiniLM:
	// 256), not its checkpoint's 512 positions.
	baseDir, err := engine.FindModel(before)
	if err != nil {
		t.Fatal(err)
	}
	baseMan, err := model.LoadManifest(baseDir)
	if err != nil {
		t.Fatal(err)
	}
	if man, err := model.LoadManifest(rep.Model); err != nil || man.MaxLength != baseMan.MaxLength {
		t.Fatalf("the student's manifest %+v (%v): want max_length %d, the index model's", man, err, baseMan.MaxLength)
	}
	if _, err := os.Stat(filepath.Join(c.Work, "adapt.json")); err != nil {
		t.Fatal(err)
	}
	// Other settings on the same work directory are refused, naming one.
	c.Steps = 5
	if _, err := Adapt(context.Background(), c); err == nil || !strings.Contains(err.Error(), "Steps") {
		t.Fatalf("changed settings: %v", err)
	}

	// The refused run, given a lower bar, checks again without training again.
	ev = events{}
	refuse.MinGain, refuse.Progress = -1, ev.add
	if rep, err = Adapt(context.Background(), refuse); err != nil || !rep.Reindexed {
		t.Fatalf("the refused run with a lower bar: %+v, %v", rep, err)
	}
	if p, ok := ev.first("train", ""); ok {
		t.Fatalf("training ran again: %+v", p)
	}
}

// A Config with Mix outside (0, 1] (a Config not started from Defaults
// has 0) is refused, naming it, before any work.
func TestConfigMix(t *testing.T) {
	for _, mix := range []float64{0, -0.5, 1.5, math.NaN()} {
		c := Defaults()
		c.Index, c.Mix = t.TempDir(), mix
		if _, err := Adapt(context.Background(), c); err == nil || !strings.Contains(err.Error(), "Mix") {
			t.Fatalf("Mix %v: %v", mix, err)
		}
	}
}
