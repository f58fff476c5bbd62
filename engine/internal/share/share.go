// Package share is the transport of engine's cross-process sharing (the
// engine package doc, "Read-only and sharing"): the process that has a
// directory open for writing answers other processes on a Unix socket in
// the directory, DIR/anna.sock (mode 0600), by HTTP with JSON bodies, one
// POST /v1/METHOD per call. This package makes and reaches that socket,
// frames requests and answers in an envelope, and carries errors across
// through the Codec its caller gives; what the methods are, what they
// carry and what an error means are the engine's.
//
// It keeps no global state. A Server stops answering and removes its
// socket on Close; a writer killed leaves the socket behind, which the
// next Listen replaces (its caller holds the directory's writer lock, so
// no live writer answers there).
package share

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/anna-search/anna/internal/safe"
)

const (
	// SockFile is the socket's name in the directory.
	SockFile = "anna.sock"
	// MaxBody bounds a request on the socket (a reader's search with its
	// filter, the texts of the documents it scores).
	MaxBody     = 256 << 20
	dialTimeout = 2 * time.Second
)

// ErrGone is wrapped by the errors of calls that found nothing answering:
// no socket, a stale one of a writer that died, or a writer that went away
// during the call.
var ErrGone = errors.New("the process writing the directory went away")

// Codec carries errors across the socket: Encode gives what the envelope
// holds for an error (marshalled as JSON), Decode makes an error of it
// again, as errors.Is and errors.As should see it on the other side.
type Codec interface {
	Encode(err error) any
	Decode(raw json.RawMessage) error
}

// Envelope frames every answer: a result or an error, never both.
type Envelope struct {
	Result json.RawMessage `json:",omitempty"`
	Error  json.RawMessage `json:",omitempty"`
}

// --- the writer's side ---

// Server answers on a directory's socket.
type Server struct {
	codec  Codec
	closed error // what Wait returns once the Server is closed
	mux    *http.ServeMux
	srv    *http.Server
	sock   string
	ready  chan struct{} // closed by Opened
	done   chan struct{} // closed by Close
	once   sync.Once
}

// Listen makes dir's socket and returns a Server that will answer on it
// once Serve is called; its handlers (Handle) wait for Opened, and fail
// with closed once it is closed.
func Listen(dir string, codec Codec, closed error) (*Server, *net.UnixListener, error) {
	ln, sock, err := listen(dir)
	if err != nil {
		return nil, nil, err
	}
	s := &Server{codec: codec, closed: closed, mux: http.NewServeMux(), sock: sock, ready: make(chan struct{}), done: make(chan struct{})}
	s.srv = &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	return s, ln, nil
}

// Serve answers on ln in a goroutine of its own until Close.
func (s *Server) Serve(ln *net.UnixListener) {
	go func() {
		_ = safe.Call(func() error { return s.srv.Serve(ln) })
	}()
}

// HandleFunc answers POST /v1/method with h, as it is (it waits for
// nothing: see Ready and Wait).
func (s *Server) HandleFunc(method string, h http.HandlerFunc) {
	s.mux.HandleFunc("POST /v1/"+method, h)
}

// Handle answers POST /v1/method: it decodes the request, waits until
// Opened and answers with fn's result or error.
func Handle[Req, Resp any](s *Server, method string, fn func(context.Context, Req) (Resp, error)) {
	s.HandleFunc(method, func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if !s.Decode(w, r, &req) {
			return
		}
		if err := s.Wait(r.Context()); err != nil {
			s.Reply(w, nil, err)
			return
		}
		out, err := fn(r.Context(), req)
		if err != nil {
			s.Reply(w, nil, err)
			return
		}
		s.Reply(w, out, nil)
	})
}

// Decode reads r's body into req, answering a bad request itself (false).
func (s *Server) Decode(w http.ResponseWriter, r *http.Request, req any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody)).Decode(req); err != nil {
		s.Reply(w, nil, fmt.Errorf("engine: %s: bad request: %w", SockFile, err))
		return false
	}
	return true
}

// Reply answers with result, or with err when it is not nil.
func (s *Server) Reply(w http.ResponseWriter, result any, err error) {
	env := Envelope{}
	if err != nil {
		env.Error = s.encodeErr(err)
	} else if raw, merr := json.Marshal(result); merr != nil {
		env.Error = s.encodeErr(fmt.Errorf("engine: encoding the answer: %w", merr))
	} else {
		env.Result = raw
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(env)
}

func (s *Server) encodeErr(err error) json.RawMessage {
	raw, merr := json.Marshal(s.codec.Encode(err))
	if merr != nil {
		raw, _ = json.Marshal(s.codec.Encode(errors.New(err.Error())))
	}
	return raw
}

// Opened lets the requests through: the engine is open.
func (s *Server) Opened() { close(s.ready) }

// Ready tells, without waiting, whether Opened was called (and Close not).
func (s *Server) Ready() (ready, closed bool) {
	select {
	case <-s.ready:
		return true, false
	case <-s.done:
		return false, true
	default:
		return false, false
	}
}

// Wait returns once Opened was called, or the closed error of Listen once
// the Server is closed.
func (s *Server) Wait(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	case <-s.done:
		return s.closed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops answering and removes the socket. It is safe to call more
// than once.
func (s *Server) Close() error {
	s.once.Do(func() {
		close(s.done)
		s.srv.Close()
		os.Remove(s.sock)
	})
	return nil
}

// listen makes dir's socket, readable and writable by its owner only: bound
// under a temporary name, restricted, then renamed into place, replacing a
// stale one (a writer that died; the caller holds the writer's lock, so no
// live one answers there).
func listen(dir string) (*net.UnixListener, string, error) {
	sock := filepath.Join(dir, SockFile)
	tmpName := SockFile + ".new"
	tmp := filepath.Join(dir, tmpName)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, "", err
	}
	addr, done, err := sockAddr(dir, tmpName)
	if err != nil {
		return nil, "", err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	done()
	if err != nil {
		return nil, "", err
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, "", err
	}
	if err := os.Rename(tmp, sock); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, "", err
	}
	return ln, sock, nil
}

// --- the reader's side ---

// Client talks to the writer answering on a directory's socket.
type Client struct {
	hc    *http.Client
	codec Codec
	done  func() // releases what reaching the socket holds
	// PID names the writer in errors, once the caller has learnt it.
	PID int
}

// Dial prepares a Client for dir's socket; nothing is sent until Call.
func Dial(dir string, codec Codec) (*Client, error) {
	addr, done, err := sockAddr(dir, SockFile)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: dialTimeout}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", addr)
		},
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return &Client{hc: &http.Client{Transport: tr}, codec: codec, done: func() {
		tr.CloseIdleConnections()
		done()
	}}, nil
}

// Close releases the client's connections.
func (c *Client) Close() { c.done() }

// Call posts in to the writer's method and decodes its answer into out.
// Errors wrapping ErrGone mean the writer is no longer there.
func (c *Client) Call(ctx context.Context, method string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("engine: encoding a request to the writer: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://anna/v1/"+method, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("engine: %w", ctx.Err())
		}
		return fmt.Errorf("%w: %v", ErrGone, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("engine: the writing process (%d) answered %s to %s", c.PID, resp.Status, method)
	}
	var env Envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("engine: %w", ctx.Err())
		}
		return fmt.Errorf("%w: %v", ErrGone, err)
	}
	if len(env.Error) > 0 && string(env.Error) != "null" {
		return c.codec.Decode(env.Error)
	}
	if err := json.Unmarshal(env.Result, out); err != nil {
		return fmt.Errorf("engine: decoding the writer's answer to %s: %w", method, err)
	}
	return nil
}

// maxSockPath is the longest socket path bind and connect take.
var maxSockPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// sockAddr is the address of the socket name in dir: its absolute path,
// or, when that is too long for a socket address (about 107 bytes), on
// Linux the path through a descriptor of dir held open until done is
// called (/proc/self/fd/N/name).
func sockAddr(dir, name string) (addr string, done func(), err error) {
	abs, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		return "", nil, fmt.Errorf("engine: %w", err)
	}
	if len(abs) <= maxSockPath {
		return abs, func() {}, nil
	}
	if runtime.GOOS != "linux" {
		return "", nil, fmt.Errorf("engine: %s is %d bytes long, more than a socket address holds (%d)", abs, len(abs), maxSockPath)
	}
	f, err := os.Open(filepath.Dir(abs))
	if err != nil {
		return "", nil, fmt.Errorf("engine: %w", err)
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", f.Fd(), name), func() { f.Close() }, nil
}
