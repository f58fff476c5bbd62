// Package parallel runs indexed work over a few goroutines.
package parallel

import (
	"context"
	"sync"
	"sync/atomic"
)

// Each calls f(i) for every i in [0, n) on up to workers goroutines, which
// take indices in increasing order; with workers <= 1 it runs inline. It
// stops handing out indices once ctx is done or an f has failed, and returns
// the first error (ctx's error if it ended the run).
func Each(ctx context.Context, n, workers int, f func(i int) error) error {
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
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
	for range workers {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := ctx.Err(); err != nil {
					fail(err)
					return
				}
				if err := f(i); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
