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

// Ahead calls f(i) for every i in [0, n) on up to workers goroutines, at
// most window indices ahead of the caller, and hands the results back in
// index order: next returns f(i)'s value and error for i = 0, 1, …, then
// ok false once all n are taken, or once ctx is done (err: ctx's error).
// It bounds the memory of work done ahead (window results) while the
// caller, on its own goroutine, does what must go in order — the folder
// ingest reads files ahead of the commits.
//
// stop ends it: no new f starts, and stop returns once the running ones
// have returned; call it when done (next after stop reports ok false). A
// panic of f is recovered and returned as its error (a *safe.PanicError).
// With workers or window ≤ 1, or n ≤ 1, next calls f inline.
func Ahead[T any](ctx context.Context, n, workers, window int, f func(ctx context.Context, i int) (T, error)) (next func() (v T, err error, ok bool), stop func()) {
	ctx = safe.Ctx(ctx)
	if workers <= 1 || window <= 1 || n <= 1 {
		i, stopped := 0, false
		next = func() (v T, err error, ok bool) {
			if stopped || i >= n {
				return v, nil, false
			}
			if err := ctx.Err(); err != nil {
				return v, err, false
			}
			err = safe.Call(func() (e error) { v, e = f(ctx, i); return e })
			i++
			return v, err, true
		}
		return next, func() { stopped = true }
	}
	type result struct {
		v   T
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	slots := make([]chan result, window) // index i's result in slots[i%window]
	for j := range slots {
		slots[j] = make(chan result, 1)
	}
	tokens := make(chan struct{}, window) // one per index taken and not yet handed back
	var taken atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				select {
				case tokens <- struct{}{}:
				case <-ctx.Done():
					return
				}
				i := int(taken.Add(1) - 1)
				if i >= n {
					<-tokens
					return
				}
				var r result
				r.err = safe.Call(func() (e error) { r.v, e = f(ctx, i); return e })
				slots[i%window] <- r
			}
		})
	}
	i, stopped := 0, false
	next = func() (v T, err error, ok bool) {
		if stopped || i >= n {
			return v, nil, false
		}
		select {
		case r := <-slots[i%window]:
			i++
			<-tokens
			return r.v, r.err, true
		case <-ctx.Done():
			return v, context.Cause(ctx), false
		}
	}
	stop = func() {
		stopped = true
		cancel()
		wg.Wait()
	}
	return next, stop
}
