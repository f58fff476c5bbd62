package parallel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

func TestAheadInOrderWithinWindow(t *testing.T) {
	for _, c := range []struct{ n, workers, window int }{{0, 4, 4}, {1, 4, 4}, {7, 1, 4}, {100, 3, 5}, {1000, 8, 2}, {50, 2, 1}} {
		var done, handed atomic.Int64 // f calls finished; results handed back
		var over atomic.Bool
		next, stop := Ahead(context.Background(), c.n, c.workers, c.window, func(_ context.Context, i int) (int, error) {
			// Started more than window ahead of the caller (+1: next frees
			// a place just before handed counts it).
			if int64(i) >= handed.Load()+int64(max(1, c.window))+1 {
				over.Store(true)
			}
			done.Add(1)
			if i%7 == 3 {
				return 0, fmt.Errorf("item %d", i)
			}
			return i * i, nil
		})
		for i := 0; ; i++ {
			v, err, ok := next()
			if !ok {
				if i != c.n || err != nil {
					t.Fatalf("%+v: ended after %d with %v", c, i, err)
				}
				break
			}
			handed.Add(1)
			if i%7 == 3 {
				if err == nil || err.Error() != fmt.Sprintf("item %d", i) {
					t.Fatalf("%+v: item %d: err %v", c, i, err)
				}
			} else if err != nil || v != i*i {
				t.Fatalf("%+v: item %d: %d, %v", c, i, v, err)
			}
		}
		stop()
		if over.Load() {
			t.Errorf("%+v: a call started more than the window ahead", c)
		}
		if done.Load() != int64(c.n) {
			t.Errorf("%+v: %d calls", c, done.Load())
		}
	}
}

func TestAheadStopsAndRecovers(t *testing.T) {
	// Cancelled: next reports the context's error; stop waits for the calls
	// running, and none starts after it.
	ctx, cancel := context.WithCancel(context.Background())
	var started atomic.Int64
	next, stop := Ahead(ctx, 1_000_000, 4, 8, func(ctx context.Context, i int) (int, error) {
		started.Add(1)
		if i == 20 {
			cancel()
		}
		return i, nil
	})
	var err error
	for {
		var ok bool
		if _, err, ok = next(); !ok {
			break
		}
	}
	stop()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
	n := started.Load()
	if n > 40 {
		t.Errorf("%d calls started for a run cancelled at 20 with a window of 8", n)
	}
	time.Sleep(10 * time.Millisecond)
	if started.Load() != n {
		t.Error("calls started after stop returned")
	}
	// Stopped early by the caller, and a panic is an error, not a crash.
	next, stop = Ahead(context.Background(), 100, 3, 4, func(_ context.Context, i int) (int, error) {
		if i == 1 {
			panic("boom")
		}
		return i, nil
	})
	if _, err, ok := next(); !ok || err != nil {
		t.Fatal(err)
	}
	_, err, _ = next()
	var pe *safe.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("panic: %v", err)
	}
	stop()
	if _, _, ok := next(); ok {
		t.Error("next after stop still hands results")
	}
}
