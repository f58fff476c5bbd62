package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/encodertest"
)

// recorder is an Adder that keeps the batches it is given; cancel, when
// set, is called after the batch numbered cancelAfter (1-based).
type recorder struct {
	batches     [][]string
	cancel      func()
	cancelAfter int
	fail        error
}

func (r *recorder) Add(ctx context.Context, docs []engine.Document) (engine.AddResult, error) {
	if err := ctx.Err(); err != nil {
		return engine.AddResult{}, err
	}
	if r.fail != nil {
		return engine.AddResult{}, r.fail
	}
	var ids []string
	for _, d := range docs {
		ids = append(ids, d.ID)
	}
	r.batches = append(r.batches, ids)
	if r.cancel != nil && len(r.batches) == r.cancelAfter {
		r.cancel()
	}
	return engine.AddResult{Added: len(docs), Committed: true}, nil
}

func docs(n int) []beir.Doc {
	out := make([]beir.Doc, n)
	for i := range out {
		out[i] = beir.Doc{ID: fmt.Sprint("d", i), Text: fmt.Sprint("text ", i)}
	}
	return out
}

func lines(ds []beir.Doc) string {
	var b strings.Builder
	for _, d := range ds {
		if d.Text == "" {
			fmt.Fprintf(&b, "{\"_id\": %q}\n", d.ID)
			continue
		}
		fmt.Fprintf(&b, "{\"_id\": %q, \"text\": %q}\n", d.ID, d.Text)
	}
	return b.String()
}

func TestSliceBatchesSkipsEmptyAndReports(t *testing.T) {
	ds := docs(7)
	ds[3].Text = " " // empty: skipped, counted
	var r recorder
	var prog []ingest.Progress
	var accepted []int
	st, err := ingest.Slice(context.Background(), &r, ds, ingest.Options{
		Batch:    2,
		Progress: func(p ingest.Progress) { prog = append(prog, p) },
		Accept:   func(line int, _ engine.Document) { accepted = append(accepted, line) },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"d0", "d1"}, {"d2", "d4"}, {"d5", "d6"}}
	if fmt.Sprint(r.batches) != fmt.Sprint(want) {
		t.Fatalf("batches %v, want %v", r.batches, want)
	}
	if st != (ingest.Stats{Read: 7, Documents: 6, Empty: 1, Added: 6}) {
		t.Fatalf("stats %+v", st)
	}
	if fmt.Sprint(accepted) != "[1 2 3 5 6 7]" {
		t.Fatalf("accepted lines %v", accepted)
	}
	if len(prog) != 4 || prog[0].Documents != 0 || prog[0].Total != 6 || prog[3].Documents != 6 || prog[1].Documents != 2 {
		t.Fatalf("progress %+v", prog)
	}
}

// An interrupt keeps the committed batches, does not add the one being
// gathered, and returns the context's error.
func TestInterruptKeepsCommittedBatches(t *testing.T) {
	for _, read := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		r := recorder{cancel: cancel, cancelAfter: 2}
		var st ingest.Stats
		var err error
		if read {
			st, err = ingest.Read(ctx, &r, strings.NewReader(lines(docs(9))), "c.jsonl", ingest.Options{Batch: 2})
		} else {
			st, err = ingest.Slice(ctx, &r, docs(9), ingest.Options{Batch: 2})
		}
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("read=%v: err %v, want context.Canceled", read, err)
		}
		if len(r.batches) != 2 || st.Documents != 4 || st.Added != 4 {
			t.Fatalf("read=%v: batches %v, stats %+v: want the 2 committed batches only", read, r.batches, st)
		}
	}
}

// A malformed line stops Read after adding the documents before it; with
// OnBad it is skipped and reading goes on.
func TestReadBadLine(t *testing.T) {
	in := lines(docs(3)) + "{not json\n" + lines(docs(5)[3:])
	var r recorder
	st, err := ingest.Read(context.Background(), &r, strings.NewReader(in), "c.jsonl", ingest.Options{Batch: 2})
	if err == nil || !strings.Contains(err.Error(), "c.jsonl:4") {
		t.Fatalf("err %v, want one naming c.jsonl:4", err)
	}
	if st.Documents != 3 || fmt.Sprint(r.batches) != "[[d0 d1] [d2]]" {
		t.Fatalf("stats %+v, batches %v: want the 3 lines before the bad one committed", st, r.batches)
	}
	r = recorder{}
	bad := 0
	st, err = ingest.Read(context.Background(), &r, strings.NewReader(in), "c.jsonl", ingest.Options{Batch: 2, OnBad: func(int, error) error { bad++; return nil }})
	if err != nil || bad != 1 || st.Documents != 5 || st.Read != 6 {
		t.Fatalf("with OnBad: err %v, bad %d, stats %+v", err, bad, st)
	}
}

func TestAddErrorAndMisuse(t *testing.T) {
	boom := errors.New("boom")
	r := recorder{fail: boom}
	if st, err := ingest.Slice(context.Background(), &r, docs(3), ingest.Options{Batch: 2}); !errors.Is(err, boom) || st.Documents != 0 {
		t.Fatalf("err %v, stats %+v", err, st)
	}
	if _, err := ingest.Slice(context.Background(), &recorder{}, docs(1), ingest.Options{Batch: -1}); err == nil {
		t.Fatal("a negative batch was accepted")
	}
	if _, err := ingest.Read(context.Background(), nil, strings.NewReader(""), "x", ingest.Options{}); err == nil {
		t.Fatal("a nil engine was accepted")
	}
}

// Into a real engine: a second run of the same input finds everything
// unchanged (what makes an interrupted ingest resumable).
func TestEngineResume(t *testing.T) {
	ctx := context.Background()
	eng, err := engine.Open(ctx, t.TempDir(), engine.Options{Encoder: &encodertest.Hashing{D: 16, FP: "fp"}, Chunking: engine.Chunking{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	in := lines(docs(5))
	cctx, cancel := context.WithCancel(ctx)
	n := 0
	_, err = ingest.Read(cctx, eng, strings.NewReader(in), "c.jsonl", ingest.Options{Batch: 2, Progress: func(p ingest.Progress) {
		if p.Documents > 0 {
			if n++; n == 1 {
				cancel()
			}
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	st, err := ingest.Read(ctx, eng, strings.NewReader(in), "c.jsonl", ingest.Options{Batch: 2})
	if err != nil || st.Unchanged != 2 || st.Added != 3 {
		t.Fatalf("resumed: err %v, stats %+v: want 2 unchanged, 3 added", err, st)
	}
}
