package server

import (
	"container/list"
	"context"
	"net/http"
	"runtime/debug"
	"sync"
)

// Bodies in flight. Each request's body is bounded (Limits.MaxBodyBytes),
// but not how many arrive at once: a request of 15 MB costs the server
// some four times that while it is decoded, and four of them at once took
// a server idling at 162 MB to 347 MB. The bodies being read and decoded
// share one budget (Limits.MaxBodyBytesInFlight, default one body of the
// largest size and 4 MiB for small ones beside it): a request takes its
// Content-Length of it (the largest size when it gives none) before its
// body is read and gives it back when it is answered; one that does not
// fit waits, first come first served, until the others are done or its
// deadline passes (504). Small requests wait only behind large ones that
// came first.

// bodyBudget is a weighted semaphore of bytes, its waiters served in
// order.
type bodyBudget struct {
	mu      sync.Mutex
	size    int64
	used    int64
	waiters list.List // of *bodyWaiter
}

type bodyWaiter struct {
	n     int64
	ready chan struct{}
}

// acquire takes n bytes of the budget (at most its size), waiting in line
// until they are free or ctx ends.
func (b *bodyBudget) acquire(ctx context.Context, n int64) error {
	n = min(n, b.size)
	b.mu.Lock()
	if b.waiters.Len() == 0 && b.used+n <= b.size {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &bodyWaiter{n: n, ready: make(chan struct{})}
	e := b.waiters.PushBack(w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.used -= n
			b.grant()
		default:
			b.waiters.Remove(e)
			b.grant() // the next ones may fit now
		}
		b.mu.Unlock()
		return ctx.Err()
	}
}

// release gives back n bytes taken by acquire.
func (b *bodyBudget) release(n int64) {
	n = min(n, b.size)
	b.mu.Lock()
	b.used -= n
	b.grant()
	b.mu.Unlock()
}

// grant admits the waiters at the front that fit. Callers hold mu.
func (b *bodyBudget) grant() {
	for e := b.waiters.Front(); e != nil; e = b.waiters.Front() {
		w := e.Value.(*bodyWaiter)
		if b.used+w.n > b.size {
			return
		}
		b.used += w.n
		b.waiters.Remove(e)
		close(w.ready)
	}
}

// withBodyBudget holds r's share of the budget while next answers it.
func (s *Server) withBodyBudget(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.ContentLength
		if n < 0 {
			n = s.lim.MaxBodyBytes
		}
		if n == 0 || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		ctx := r.Context()
		if s.opts.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.opts.Timeout)
			defer cancel()
		}
		if err := s.bodies.acquire(ctx, n); err != nil {
			s.fail(w, r, err)
			return
		}
		defer s.bodies.release(n)
		if n >= largeBody {
			defer s.returnMemory()
		}
		next.ServeHTTP(w, r)
	})
}

// largeBody is the size from which a request's memory is handed back to
// the operating system once it is answered.
const largeBody = 4 << 20

// returnMemory gives the memory a large request used back to the
// operating system (debug.FreeOSMemory: a collection, then the free pages
// returned), in the background and one at a time. Go's own scavenger
// returns it too, but over minutes: a server that answered one 15 MB
// request stayed 100 MB above its idle size meanwhile.
func (s *Server) returnMemory() {
	if !s.freeing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.freeing.Store(false)
		debug.FreeOSMemory()
	}()
}
