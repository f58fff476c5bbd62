package inference

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/anna-search/anna/internal/tokenizer"
)

// fakeEncs gives input i lens[i] tokens, all with id i.
func fakeEncs(lens []int) func(lo, hi int) []tokenizer.Encoding {
	return func(lo, hi int) []tokenizer.Encoding {
		out := make([]tokenizer.Encoding, hi-lo)
		for j := range out {
			out[j].IDs = slices.Repeat([]int64{int64(lo + j)}, lens[lo+j])
		}
		return out
	}
}

// schedule records the batches forEachBatch runs, in a canonical order.
func schedule(t *testing.T, lens []int, window, size, tokens, even, workers int) [][]int {
	t.Helper()
	var mu sync.Mutex
	var batches [][]int
	err := forEachBatch(context.Background(), len(lens), window, batching{size, tokens, even}, workers, fakeEncs(lens), func(rows []int, encs []tokenizer.Encoding) error {
		for j, i := range rows {
			if len(encs[j].IDs) != lens[i] || (lens[i] > 0 && encs[j].IDs[0] != int64(i)) {
				t.Errorf("row %d of a batch is input %d but carries another's encoding", j, i)
			}
		}
		mu.Lock()
		batches = append(batches, slices.Clone(rows))
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(batches, func(a, b []int) int { return slices.Compare(a, b) })
	return batches
}

func TestForEachBatch(t *testing.T) {
	lens := []int{5, 2, 7, 2, 1, 9, 2, 3, 5, 4}
	// One window: sorted by length, ties in input order, batches of 3.
	got := schedule(t, lens, 0, 3, 1024, 0, 1)
	want := [][]int{{4, 1, 3}, {6, 7, 9}, {0, 8, 2}, {5}}
	slices.SortFunc(want, func(a, b []int) int { return slices.Compare(a, b) })
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("one window: batches %v, want %v", got, want)
	}
	// Windows of 4 sort and batch separately: [0,4) [4,8) [8,10).
	got = schedule(t, lens, 4, 3, 1024, 0, 1)
	want = [][]int{{1, 3, 0}, {2}, {4, 6, 7}, {5}, {9, 8}}
	slices.SortFunc(want, func(a, b []int) int { return slices.Compare(a, b) })
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("windows of 4: batches %v, want %v", got, want)
	}
	// Workers change which goroutine runs a batch, not the batches.
	for _, w := range []int{2, 3, 8} {
		if g := schedule(t, lens, 4, 3, 1024, 0, w); !slices.EqualFunc(g, want, slices.Equal) {
			t.Errorf("%d workers: batches %v, want %v", w, g, want)
		}
	}
	if g := schedule(t, nil, 0, 3, 1024, 0, 2); len(g) != 0 {
		t.Errorf("no inputs: %v", g)
	}
	// A token cap of 10: sorted lengths 1 2 2 2 3 4 5 5 7 9 go 1 2 2 (size
	// 3) | 2 3 (with the 4, 3 × 4 > 10) | 4 5 | 5 (2 × 7 > 10) | 7 | 9.
	got = schedule(t, lens, 0, 3, 10, 0, 2)
	want = [][]int{{4, 1, 3}, {6, 7}, {9, 0}, {8}, {2}, {5}}
	slices.SortFunc(want, func(a, b []int) int { return slices.Compare(a, b) })
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("at most 10 tokens: batches %v, want %v", got, want)
	}
	// A cap of 4: 1 2 | 2 2 | then every input alone, 5, 7 and 9 over it.
	if g := schedule(t, lens, 0, 3, 4, 0, 1); len(g) != 8 {
		t.Errorf("at most 4 tokens: %d batches %v, want 8", len(g), g)
	}
	// One length a batch from 4 tokens: 1 2 2 | 2 3 (under 4, padded) |
	// 4 | 5 5 | 7 | 9, each from 4 on unpadded, batches of 3 at most.
	got = schedule(t, lens, 0, 3, 1024, 4, 2)
	want = [][]int{{4, 1, 3}, {6, 7}, {9}, {0, 8}, {2}, {5}}
	slices.SortFunc(want, func(a, b []int) int { return slices.Compare(a, b) })
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("one length from 4 tokens: batches %v, want %v", got, want)
	}
}

func TestForEachBatchStops(t *testing.T) {
	lens := make([]int, 100)
	boom := errors.New("boom")
	var mu sync.Mutex
	ran := 0
	err := forEachBatch(context.Background(), len(lens), 10, batching{2, 1024, 0}, 1, fakeEncs(lens), func(rows []int, _ []tokenizer.Encoding) error {
		mu.Lock()
		defer mu.Unlock()
		if ran++; ran == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || ran != 3 {
		t.Errorf("error in batch 3: err %v after %d batches", err, ran)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran = 0
	err = forEachBatch(ctx, len(lens), 10, batching{2, 1024, 0}, 1, fakeEncs(lens), func(rows []int, _ []tokenizer.Encoding) error {
		if ran++; ran == 2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || ran != 2 {
		t.Errorf("cancelled in batch 2: err %v after %d batches", err, ran)
	}
}

func TestOptionsDefaults(t *testing.T) {
	cores := runtime.NumCPU()
	enc := Options{IntraOpThreads: 1, InterOpThreads: 1, BatchSize: 32}
	if got := (Options{}).withDefaults(enc); got != (Options{IntraOpThreads: 1, InterOpThreads: 1, Workers: cores, BatchSize: 32, BatchTokens: 1024}) { // the backend: chosen per model at Open (backendFor)
		t.Errorf("encoder defaults: %+v", got)
	}
	if got := (Options{IntraOpThreads: 2 * cores, BatchSize: -1}).withDefaults(enc); got.Workers != 1 || got.BatchSize != 32 {
		t.Errorf("more threads than cores: %+v", got)
	}
	rr := Options{Workers: 1, BatchSize: 16}
	if got := (Options{MaxLength: 64}).withDefaults(rr); got != (Options{Workers: 1, BatchSize: 16, BatchTokens: 1024, MaxLength: 64}) {
		t.Errorf("reranker defaults: %+v", got)
	}
	if got := (Options{IntraOpThreads: 1, Workers: 3}).withDefaults(rr); got.Workers != 3 || got.IntraOpThreads != 1 {
		t.Errorf("explicit workers: %+v", got)
	}
	if got := (Options{}).withDefaults(Options{}); got.Workers != 1 || got.BatchSize != 32 || got.IntraOpThreads != 0 {
		t.Errorf("no defaults (all cores per operator, so one worker): %+v", got)
	}
	if got := (Options{}).withDefaults(Options{Backend: BackendGo}); got.Backend != BackendGo {
		t.Errorf("the Spec's backend: %+v", got)
	}
	if got := (Options{Backend: BackendORT}).withDefaults(Options{Backend: BackendGo}); got.Backend != BackendORT {
		t.Errorf("an explicit backend over the Spec's: %+v", got)
	}
}
