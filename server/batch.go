package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// job is one request's part of a batch: its size (texts and tokens), and
// where its answer goes.
type job interface {
	size() (texts, tokens int)
	context() context.Context
	fail(err error)
}

// batcher coalesces concurrent requests: one goroutine takes the first
// waiting job, waits up to wait for more (taking at once any that are
// queued), up to maxTexts texts and maxTokens tokens, and runs them as one
// batch; jobs queued while a batch runs form the next one. A single job
// larger than the bounds runs alone. The batch's context is cancelled
// when every job in it has been cancelled (their clients went away), or
// when the batcher's base context is (Close).
type batcher[J job] struct {
	base                context.Context
	in                  chan J
	wait                time.Duration
	maxTexts, maxTokens int
	run                 func(ctx context.Context, jobs []J)
	observe             func(jobs, texts, tokens int)
	done                chan struct{}
}

func newBatcher[J job](base context.Context, wait time.Duration, maxTexts, maxTokens int, run func(context.Context, []J), observe func(jobs, texts, tokens int)) *batcher[J] {
	b := &batcher[J]{base: base, in: make(chan J), wait: wait, maxTexts: maxTexts, maxTokens: maxTokens, run: run, observe: observe, done: make(chan struct{})}
	go b.loop()
	return b
}

// submit hands j to the batcher; false when the batcher has stopped or
// j's context ended first (j is then not run).
func (b *batcher[J]) submit(j J) bool {
	select {
	case b.in <- j:
		return true
	case <-b.base.Done():
		return false
	case <-j.context().Done():
		return false
	}
}

// wait returns once the loop has stopped (after the base context ends).
func (b *batcher[J]) waitDone() { <-b.done }

func (b *batcher[J]) loop() {
	defer close(b.done)
	var held *J // a job that did not fit the last batch: the next one's first
	for {
		var first J
		if held != nil {
			first, held = *held, nil
		} else {
			select {
			case first = <-b.in:
			case <-b.base.Done():
				return
			}
		}
		batch := []J{first}
		texts, tokens := first.size()
		var timer <-chan time.Time
		var t *time.Timer
		if b.wait > 0 {
			t = time.NewTimer(b.wait)
			timer = t.C
		}
	collect:
		for texts < b.maxTexts && tokens < b.maxTokens {
			var j J
			if timer == nil {
				select {
				case j = <-b.in:
				default:
					break collect
				}
			} else {
				select {
				case j = <-b.in:
				case <-timer:
					break collect
				case <-b.base.Done():
					break collect
				}
			}
			n, tk := j.size()
			if texts+n > b.maxTexts || tokens+tk > b.maxTokens {
				held = &j
				break
			}
			batch = append(batch, j)
			texts, tokens = texts+n, tokens+tk
		}
		if t != nil {
			t.Stop()
		}
		b.runBatch(batch, texts, tokens)
	}
}

// runBatch runs the live jobs of batch under a context cancelled once all
// of them are.
func (b *batcher[J]) runBatch(batch []J, texts, tokens int) {
	live := batch[:0]
	for _, j := range batch {
		if err := j.context().Err(); err != nil {
			j.fail(err)
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(b.base)
	defer cancel()
	var left atomic.Int64
	left.Store(int64(len(live)))
	stops := make([]func() bool, 0, len(live))
	for _, j := range live {
		stops = append(stops, context.AfterFunc(j.context(), func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	if b.observe != nil {
		b.observe(len(live), texts, tokens)
	}
	b.run(ctx, live)
	for _, stop := range stops {
		stop()
	}
}

// roundTrip submits j to b and waits for ans, j's answer: its value and
// error, or why j was not run or not waited for (the batcher stopped, or
// ctx, the request's context, ended).
func roundTrip[J job, T any](ctx context.Context, b *batcher[J], j J, ans *answer[T]) (T, error) {
	var zero T
	if !b.submit(j) {
		return zero, errors.Join(ctx.Err(), b.base.Err(), context.Canceled)
	}
	select {
	case res := <-ans.ch:
		return res.val, res.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// result is what a waiting request receives.
type result[T any] struct {
	val T
	err error
}

// answer is a one-shot reply channel.
type answer[T any] struct {
	once sync.Once
	ch   chan result[T]
}

func newAnswer[T any]() *answer[T] { return &answer[T]{ch: make(chan result[T], 1)} }

func (a *answer[T]) send(v T, err error) {
	a.once.Do(func() { a.ch <- result[T]{v, err} })
}
