package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/anna-search/anna/internal/safe"
)

// IsLoopback reports whether addr (host:port) binds loopback only: a
// literal loopback IP or "localhost". An empty host (all interfaces) is
// not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Serve answers h on every listener until ctx is done, then stops
// accepting, lets the requests in flight finish for up to grace, cancels
// those still running (their contexts, down into the engine) and returns
// with the connections closed (Engine.Close then waits for the engine
// calls of handlers cancelled). It returns nil after a shutdown that
// ctx asked for, or the first listener's error.
func Serve(ctx context.Context, h http.Handler, lns []net.Listener, grace time.Duration) error {
	ctx = safe.Ctx(ctx)
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	if sd, ok := h.(interface{ shutdown() }); ok {
		srv.RegisterOnShutdown(sd.shutdown)
	}
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { errc <- srv.Serve(ln) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		err = fmt.Errorf("serve: %w", err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), grace)
	defer scancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		// Past the grace period: cancel what is still running (the
		// engine's calls see it; Engine.Close waits for them) and close
		// the connections.
		cancel()
		srv.Close()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
