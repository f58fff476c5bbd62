package server

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/clip"
)

// Safe on a desktop. A key-less server on 127.0.0.1 is reachable by every
// web page its user opens: a page may send it requests (it cannot read the
// answers unless CORS allows), and a page whose name its attacker rebinds
// to 127.0.0.1 (DNS rebinding) is same-origin with it and may read and
// write everything. guard wraps the whole handler, so every route — those
// of this file's package added later included — gets these rules before
// its own:
//
//   - Host must name this server: a loopback name (localhost,
//     *.localhost), an IP address (a rebound page's Host is the attacker's
//     name, never an address), or one of Options.AllowedHosts (annactl
//     serve adds its --listen name). Else 403 forbidden. A request over a
//     Unix socket (annactl serve --unix) may name any host: no browser
//     reaches one.
//   - A request that may write (any method but GET, HEAD and OPTIONS) from
//     a browser page of another origin is refused, 403 forbidden: its
//     Origin header (browsers send it on every such request, "null" from
//     sandboxes and files) must be this server's own origin or one of
//     Options.CORS. Clients that are not browsers send no Origin.
//   - A body is read as JSON only when it says so: a request that may write
//     and carries a body needs Content-Type application/json (or +json, or
//     the JSON-lines types /v1/documents reads), else 415. A page can send
//     a body without a preflight only as text/plain, a form, or with no
//     type at all (a Blob): none of them is read.
//   - CORS headers are sent to the origins of Options.CORS only ("*": any,
//     for a server behind a key), with the answers to their preflights.
//   - The body must arrive within the request's timeout (Options.Timeout,
//     else a minute), also when the answer is a 401 (which closes the
//     connection rather than wait for the rest): a body trickled at a byte
//     a second held a connection past 100 s.
//   - Every answer says X-Content-Type-Options: nosniff and
//     Cross-Origin-Resource-Policy: same-origin (no page can embed an answer
//     as a script, image or style).

// guard returns next behind the rules above.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		// Not every ResponseWriter can (an httptest.ResponseRecorder, a
		// program's own wrapper): then the program's http.Server bounds it.
		_ = http.NewResponseController(w).SetReadDeadline(start.Add(s.bodyTimeout()))
		refuse := func(a *hint.Action, status int, code, format string, args ...any) {
			h.Set("Connection", "close")
			e := errorf(status, code, format, args...)
			if a != nil {
				e.with(*a)
			}
			s.writeError(w, e)
			s.metrics.observe("refused", r.Method, status, time.Since(start))
		}
		if !s.hostAllowed(r.Host) && !overUnixSocket(r) {
			refuse(&hint.Action{Kind: hint.SetOption, Option: "server.Options.AllowedHosts"}, http.StatusForbidden, "forbidden", "Host %q is not this server's: requests must name it by a loopback name, an IP address or an allowed host (Options.AllowedHosts); this guards against DNS rebinding", clip.String(r.Host))
			return
		}
		origin := r.Header.Get("Origin")
		cors := origin != "" && s.corsAllowed(origin)
		if cors {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
			if !cors {
				refuse(&hint.Action{Kind: hint.SetOption, Option: "server.Options.CORS"}, http.StatusForbidden, "forbidden", "origin %q may not call this server from a browser (Options.CORS allows one)", clip.String(origin))
				return
			}
			h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, X-API-Key")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if mayWrite(r.Method) && origin != "" && !cors && !sameOrigin(origin, r) {
			refuse(&hint.Action{Kind: hint.SetOption, Option: "server.Options.CORS"}, http.StatusForbidden, "forbidden", "a %s from the web page of origin %q: cross-origin browser requests that may write are refused (Options.CORS allows one)", r.Method, clip.String(origin))
			return
		}
		if mayWrite(r.Method) && r.ContentLength != 0 {
			if ct := r.Header.Get("Content-Type"); !jsonBody(ct) {
				refuse(nil, http.StatusUnsupportedMediaType, "invalid_request", "Content-Type %q: a request body is read only as application/json (or application/x-ndjson for /v1/documents); send the header (curl: -H 'Content-Type: application/json')", clip.String(ct))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// overUnixSocket reports whether r came over a Unix socket.
func overUnixSocket(r *http.Request) bool {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && a.Network() == "unix"
}

// bodyTimeout is how long a request's body may take to arrive.
func (s *Server) bodyTimeout() time.Duration {
	if s.opts.Timeout > 0 {
		return s.opts.Timeout
	}
	return time.Minute
}

// mayWrite reports whether a request of method may change something.
func mayWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// jsonBody reports whether a Content-Type says JSON (or JSON lines).
func jsonBody(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch {
	case mt == "application/json", strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"):
		return true
	case mt == "application/x-ndjson", mt == "application/jsonl", mt == "application/json-lines":
		return true
	}
	return false
}

// hostAllowed reports whether a request's Host names this server (see
// guard). An empty Host (HTTP/1.0) is no browser's.
func (s *Server) hostAllowed(host string) bool {
	if host == "" {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") || net.ParseIP(name) != nil {
		return true
	}
	return slices.ContainsFunc(s.opts.AllowedHosts, func(a string) bool { return strings.EqualFold(strings.TrimSuffix(a, "."), name) })
}

// corsAllowed reports whether origin is one of Options.CORS.
func (s *Server) corsAllowed(origin string) bool {
	return slices.ContainsFunc(s.opts.CORS, func(o string) bool {
		return o == "*" && origin != "null" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin)
	})
}

// sameOrigin reports whether origin is the origin of the server r was
// sent to: the scheme of its connection and its Host.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false // "null", or not an origin
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return u.Scheme == scheme && strings.EqualFold(u.Host, r.Host)
}
