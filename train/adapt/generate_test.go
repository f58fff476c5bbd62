package adapt

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/model/gguf/gguftest"
)

func readPairs(t *testing.T, path string) []pair {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ps []pair
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var p pair
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// TestAdaptGenerates: adapt with Generate 2 and the real SmolLM2 on a
// 12-document index, end to end: cancelled while decoding it stops within
// seconds; cancelled after its first document (batches of 1) and run again
// it decodes only the second, reusing what was written (a line edited in
// between is taken as written); its time is estimated from the batch it
// decodes; each generated query's document is its candidate positive,
// among the extractive queries, and the index is reindexed.
func TestAdaptGenerates(t *testing.T) {
	tmp := t.TempDir()
	gguf := gguftest.SmolLM2(t, t.TempDir())
	index := tinyIndex(t, filepath.Join(tmp, "idx"), 12)
	base := tinyBase(t, 0)
	c := tinyConfig(t, index, filepath.Join(tmp, "work"), base)
	c.Generate, c.Generator, c.MinGain = 2, gguf, -1
	var (
		mu   sync.Mutex
		logs []string
	)
	c.Logf = func(format string, args ...any) {
		t.Logf(format, args...)
		mu.Lock()
		logs = append(logs, format)
		mu.Unlock()
	}
	const unit = "documents (doc2query)"
	run := func(ctx context.Context, progress func(Progress)) (Report, error) {
		cc := c
		cc.Progress = progress
		return adapt(ctx, cc, 1)
	}

	// Cancelled while decoding its first document.
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	var cancelled time.Time
	_, err := run(ctx, func(p Progress) {
		if p.Unit == unit {
			once.Do(func() {
				time.AfterFunc(300*time.Millisecond, func() { mu.Lock(); cancelled = time.Now(); mu.Unlock(); cancel() })
			})
		}
	})
	mu.Lock()
	since := time.Since(cancelled)
	mu.Unlock()
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `stage "queries"`) || since > 5*time.Second {
		t.Fatalf("cancelled while decoding: %v, %s after the cancel", err, since)
	}

	// Cancelled after its first document.
	ctx, cancel = context.WithCancel(context.Background())
	if _, err = run(ctx, func(p Progress) {
		if p.Unit == unit && p.Done == 1 {
			cancel()
		}
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled after the first document: %v", err)
	}
	qpath := filepath.Join(c.Work, generatedDir, "queries.jsonl")
	bs, err := os.ReadFile(qpath)
	if err != nil || strings.Count(string(bs), "\n") != 1 {
		t.Fatalf("after one document queries.jsonl holds %q (%v)", bs, err)
	}
	var first struct{ Text, Doc string }
	if err := json.Unmarshal(bs, &first); err != nil || first.Text == "" {
		t.Fatalf("queries.jsonl: %q (%v)", bs, err)
	}
	// An edit shows the rerun reads the line rather than decoding it again.
	js, _ := json.Marshal(first.Text)
	edited := strings.Replace(string(bs), `"text":`+string(js), `"text":"edited query"`, 1)
	if edited == string(bs) {
		t.Fatalf("queries.jsonl's line %q has no text field to edit", bs)
	}
	if err := os.WriteFile(qpath, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}

	var ev events
	logs = nil
	rep, err := run(context.Background(), ev.add)
	if err != nil {
		t.Fatal(err)
	}
	var gen []Progress
	for _, p := range ev.all {
		if p.Unit == unit {
			gen = append(gen, p)
		}
	}
	if len(gen) != 2 || gen[0].Done != 1 || gen[0].Total != 2 || gen[1].Done != 2 {
		t.Fatalf("resumed generation reported %+v: want 1 of 2 done at its start, 2 at its end", gen)
	}
	if !slices.ContainsFunc(logs, func(f string) bool { return strings.HasPrefix(f, "estimated time on this machine") }) || rep.Estimate <= 0 {
		t.Fatalf("no estimate from the batch decoded: %q, %s", logs, rep.Estimate)
	}
	// 12 extractive queries, then 2 generated; the tenth held out.
	if rep.Generated != 2 || rep.Queries != 13 || rep.HeldOut != 1 || !rep.Reindexed {
		t.Fatalf("report %+v: want 2 generated of 13 training queries and 1 held out, reindexed", rep)
	}
	tr := readPairs(t, filepath.Join(c.Work, trainFile))
	generated := tr[len(tr)-2:]
	eng, err := engine.Open(context.Background(), index, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if generated[0].PosIDs[0] == generated[1].PosIDs[0] || !slices.ContainsFunc(generated, func(p pair) bool { return p.Query == "edited query" && p.PosIDs[0] == first.Doc }) {
		t.Fatalf("generated pairs %+v: want one query for each of 2 documents, the first run's (edited) reused", generated)
	}
	for _, p := range generated {
		if d, err := eng.Get(context.Background(), p.PosIDs[0]); err != nil || len(d) != 1 || p.Query == "" {
			t.Fatalf("generated pair %+v: not a query for a document of the index (%v)", p, err)
		}
	}
}
