// Package parallel runs indexed work over a few goroutines.
package parallel

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/anna-search/anna/internal/safe"
)

// Each calls f(i) for every i in [0, n) on up to workers goroutines, which
// take indices in increasing order; with workers <= 1 it runs inline. It
// stops handing out indices once ctx is done or an f has failed, and returns
// the first error (ctx's error if it ended the run). A panic of f is
// recovered and returned as that error (a *safe.PanicError naming the
// panic and where it happened), on a worker as inline: it never ends the
// process. A nil ctx is context.Background().
func Each(ctx context.Context, n, workers int, f func(i int) error) error {
	ctx = safe.Ctx(ctx)
	workers = min(workers, n)
	if workers <= 1 {
		return safe.Call(func() error {
			for i := range n {
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := f(i); err != nil {
					return err
				}
			}
			return nil
		})
	}
	var (
		next   atomic.Int64
		failed atomic.Bool
		once   sync.Once
		first  error
		wg     sync.WaitGroup
	)
	fail := func(err error) {
		once.Do(func() { first = err })
		failed.Store(true)
	}
	work := func() error {
		for !failed.Load() {
			i := int(next.Add(1) - 1)
			if i >= n {
				return nil
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	}
	for range workers {
		wg.Go(func() {
			if err := safe.Call(work); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	return first
}
