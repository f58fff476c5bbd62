package parallel

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anna-search/anna/internal/safe"
)

func TestEachVisitsEveryIndexOnce(t *testing.T) {
	for _, workers := range []int{0, 1, 3, 64} {
		for _, n := range []int{0, 1, 7, 1000} {
			seen := make([]atomic.Int32, n)
			if err := Each(context.Background(), n, workers, func(i int) error {
				seen[i].Add(1)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			for i := range seen {
				if c := seen[i].Load(); c != 1 {
					t.Fatalf("workers %d n %d: index %d visited %d times", workers, n, i, c)
				}
			}
		}
	}
}

func TestEachStopsOnErrorAndCancel(t *testing.T) {
	boom := errors.New("boom")
	for _, workers := range []int{1, 4} {
		var calls atomic.Int32
		err := Each(context.Background(), 10000, workers, func(i int) error {
			calls.Add(1)
			if i == 10 {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Fatalf("workers %d: err = %v, want boom", workers, err)
		}
		if c := calls.Load(); c >= 10000 {
			t.Fatalf("workers %d: %d calls after an error: did not stop", workers, c)
		}
		ctx, cancel := context.WithCancel(context.Background())
		calls.Store(0)
		err = Each(ctx, 10000, workers, func(i int) error {
			if calls.Add(1) == 5 {
				cancel()
			}
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("workers %d: err = %v, want context.Canceled", workers, err)
		}
		if c := calls.Load(); c >= 10000 {
			t.Fatalf("workers %d: %d calls after cancel: did not stop", workers, c)
		}
	}
}

// A panicking f fails the run with an error that names the panic, on a
// worker goroutine (where it would otherwise end the process) as inline;
// so does a nil context, which is context.Background().
func TestEachRecoversPanics(t *testing.T) {
	for _, workers := range []int{1, 4} {
		var noCtx context.Context
		err := Each(noCtx, 1000, workers, func(i int) error {
			if i == 10 {
				panic("boom")
			}
			return nil
		})
		var p *safe.PanicError
		if !errors.As(err, &p) || p.Value != "boom" || !strings.Contains(p.Frame, "TestEachRecoversPanics") {
			t.Fatalf("workers %d: err = %#v, want a *safe.PanicError of boom naming this test", workers, err)
		}
		if err := Each(noCtx, 100, workers, func(int) error { return nil }); err != nil {
			t.Fatalf("workers %d, nil context: %v", workers, err)
		}
	}
}
