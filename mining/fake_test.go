package mining

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/internal/format/flagembedding"
)

// memCorpus is an in-memory corpus with a word-overlap retriever: enough to
// test the miner's logic without the engine.
type memCorpus struct {
	ids   []string
	texts map[string]string
	delay time.Duration // per Retrieve, to make runs long enough to kill
}

func (c *memCorpus) Text(_ context.Context, id string) (string, bool, error) {
	t, ok := c.texts[id]
	return t, ok, nil
}

func overlap(q, d string) float64 {
	qs := strings.Fields(strings.ToLower(q))
	ds := map[string]bool{}
	for _, w := range strings.Fields(strings.ToLower(d)) {
		ds[w] = true
	}
	n := 0
	for _, w := range qs {
		if ds[w] {
			n++
		}
	}
	return float64(n) / float64(len(qs)+1)
}

func (c *memCorpus) Retrieve(ctx context.Context, q Query, k int) ([]Candidate, error) {
	if c.delay > 0 {
		select {
		case <-time.After(c.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var out []Candidate
	for _, id := range c.ids {
		if s := overlap(q.Text, c.texts[id]); s > 0 {
			out = append(out, Candidate{ID: id, Score: s})
		}
	}
	slices.SortStableFunc(out, func(a, b Candidate) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(out) > k {
		out = out[:k]
	}
	for i := range out {
		out[i].Rank = i
	}
	return out, nil
}

// funcTeacher scores with a function of (query, doc).
type funcTeacher struct {
	name string
	f    func(q, d string) float64
}

func (t funcTeacher) Name() string { return t.name }
func (t funcTeacher) Score(_ context.Context, q Query, docs []Doc) ([]float64, error) {
	out := make([]float64, len(docs))
	for i, d := range docs {
		out[i] = t.f(q.Text, d.Text)
	}
	return out, nil
}

// overlapTeacher is word overlap scaled to look like cross-encoder logits
// (mostly negative).
var overlapTeacher = funcTeacher{"fake-logits", func(q, d string) float64 { return 8*overlap(q, d) - 6 }}

// synth builds a corpus of n documents over a small vocabulary and a pairs
// file of nq queries, each made of words from one document (its positive).
func synth(t testing.TB, n, nq int, seed uint64) (*memCorpus, string) {
	t.Helper()
	c, pairs := synthData(n, nq, seed)
	return c, writeFile(t, "pairs.jsonl", pairs)
}

// synthData is synth without a testing.TB, for child processes.
func synthData(n, nq int, seed uint64) (*memCorpus, string) {
	rng := rand.New(rand.NewPCG(seed, 7))
	vocab := make([]string, 300)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%d", i)
	}
	c := &memCorpus{texts: map[string]string{}}
	for i := range n {
		ws := make([]string, 12)
		for j := range ws {
			ws[j] = vocab[rng.IntN(len(vocab))]
		}
		id := fmt.Sprintf("d%d", i)
		c.ids = append(c.ids, id)
		c.texts[id] = strings.Join(ws, " ")
	}
	var b strings.Builder
	for i := range nq {
		id := c.ids[rng.IntN(n)]
		ws := strings.Fields(c.texts[id])
		q := strings.Join(ws[:4], " ") + " " + vocab[rng.IntN(len(vocab))]
		rec := map[string]any{"query": q, "pos": []string{c.texts[id]}}
		if i%5 == 0 { // some queries with two positives
			rec["pos"] = []string{c.texts[id], c.texts[c.ids[rng.IntN(n)]]}
		}
		j, _ := json.Marshal(rec)
		b.Write(j)
		b.WriteByte('\n')
	}
	return c, b.String()
}

func readFlag(t testing.TB, path string) []flagembedding.Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []flagembedding.Record
	for i, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		var r flagembedding.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		out = append(out, r)
	}
	return out
}

func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func mine(t testing.TB, c *memCorpus, teacher Teacher, pairs string, opt Options) (string, *Stats, error) {
	t.Helper()
	return mineWith(t, c, c, teacher, pairs, opt)
}

func mineWith(t testing.TB, r Retriever, c Corpus, teacher Teacher, pairs string, opt Options) (string, *Stats, error) {
	t.Helper()
	m, err := New(r, teacher, c, opt)
	if err != nil {
		t.Fatal(err)
	}
	src, err := OpenPairs(context.Background(), pairs, PromptDefaults{Instruction: "Find the document."})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := filepath.Join(t.TempDir(), "mined.jsonl")
	st, err := m.Run(context.Background(), src, out)
	return out, st, err
}
