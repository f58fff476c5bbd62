package weaviate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/anna-search/anna/internal/safe"
)

// ErrUnauthorized is wrapped by errors of requests Weaviate refused for
// want of a valid API key (HTTP 401 or 403).
var ErrUnauthorized = errors.New("refused: no valid API key")

// ErrNotFound is wrapped by errors about a collection or alias that does
// not exist.
var ErrNotFound = errors.New("not found")

// Config says where the cluster is and how to talk to it.
type Config struct {
	// URLs of the cluster's nodes (http://127.0.0.1:8080); requests go to
	// the first that answers.
	URLs []string
	// APIKey is sent as a bearer token when not empty. Tools read it from
	// the environment (ANNA_WEAVIATE_API_KEY), never from a flag.
	APIKey string
	// Alias is the name searches and writes go through; collections are
	// Alias_g1, Alias_g2, ... It must be a valid Weaviate class name
	// (a capital letter, then letters, digits and _). Default "Anna".
	Alias string
	// Replication is the replication factor of the collections created
	// (0: the server's default).
	Replication int
	// WriteConsistency and ReadConsistency are Weaviate consistency levels
	// (ONE, QUORUM, ALL); defaults QUORUM and ONE.
	WriteConsistency, ReadConsistency string
	// HTTP, when set, sends the requests (default: a client with a 2-minute
	// timeout).
	HTTP *http.Client
	// RetryFor bounds how long a request is tried again while no node
	// answers or the answers are transient (default 30 s; a Raft leader
	// election takes about 10 s).
	RetryFor time.Duration
}

// Error is a failed request: which node, which collection, what was asked,
// and why.
type Error struct {
	URL        string // the request's URL
	Collection string // "" when the request is about no collection
	Op         string // what anna asked ("batch upsert", "bm25 search", ...)
	Status     int    // HTTP status, 0 when no answer came
	Msg        string // Weaviate's message
	Err        error  // the cause: ErrUnauthorized, ErrNotFound, a network error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "weaviate: %s", e.Op)
	if e.Collection != "" {
		fmt.Fprintf(&b, " on collection %s", e.Collection)
	}
	fmt.Fprintf(&b, " (%s)", e.URL)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	if e.Msg != "" {
		fmt.Fprintf(&b, ": %s", e.Msg)
	}
	if e.Err != nil && (e.Status == 0 || e.Msg == "") {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Client talks to one cluster.
type Client struct {
	cfg  Config
	hc   *http.Client
	mu   sync.Mutex
	live int // index in cfg.URLs of the node that answered last
}

var className = regexp.MustCompile(`^[A-Z][_0-9A-Za-z]*$`)

var consistencyLevels = map[string]bool{"ONE": true, "QUORUM": true, "ALL": true}

// New checks cfg and returns a client; it sends nothing.
func New(cfg Config) (*Client, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("weaviate: no URL")
	}
	for i, u := range cfg.URLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("weaviate: URL %q: want http(s)://HOST:PORT", u)
		}
		cfg.URLs[i] = strings.TrimRight(u, "/")
	}
	if cfg.Alias == "" {
		cfg.Alias = "Anna"
	}
	if !className.MatchString(cfg.Alias) {
		return nil, fmt.Errorf("weaviate: alias %q: want a capital letter, then letters, digits or _", cfg.Alias)
	}
	if cfg.Replication < 0 {
		return nil, fmt.Errorf("weaviate: replication factor %d: must be 0 (the server's default) or positive", cfg.Replication)
	}
	if cfg.WriteConsistency == "" {
		cfg.WriteConsistency = "QUORUM"
	}
	if cfg.ReadConsistency == "" {
		cfg.ReadConsistency = "ONE"
	}
	for _, l := range []string{cfg.WriteConsistency, cfg.ReadConsistency} {
		if !consistencyLevels[l] {
			return nil, fmt.Errorf("weaviate: consistency level %q: want ONE, QUORUM or ALL", l)
		}
	}
	if cfg.RetryFor == 0 {
		cfg.RetryFor = 30 * time.Second
	}
	hc := cfg.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Minute}
	}
	return &Client{cfg: cfg, hc: hc}, nil
}

// Alias is the name the client's collections are reached by.
func (c *Client) Alias() string { return c.cfg.Alias }

// URLs are the nodes the client talks to.
func (c *Client) URLs() []string { return append([]string(nil), c.cfg.URLs...) }

// do sends one request, trying the nodes in turn from the last that
// answered while the failure is a connection error (the request never
// reached a server, or the server went away), and trying again, for up to
// Config.RetryFor, while every node failed or the answer was transient (a
// 5xx, 429, or the 403 Weaviate answers while its Raft leader is being
// elected). Every request here may be sent twice: upserts carry fixed ids,
// deletes name what to delete. out, when not nil, receives the decoded
// JSON body.
func (c *Client) do(ctx context.Context, op, coll, method, path string, in, out any) error {
	return c.doWithin(ctx, 0, op, coll, method, path, in, out)
}

// quick is the time one attempt of a metadata request (alias, schema,
// state object) may take: Weaviate 1.35 forwards alias reads to the Raft
// leader, and one sent just after the leader died hangs until cut off.
const quick = 10 * time.Second

// doWithin is do with each attempt cut off after within (0: only the HTTP
// client's timeout).
func (c *Client) doWithin(ctx context.Context, within time.Duration, op, coll, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = marshal(in); err != nil {
			return &Error{URL: path, Collection: coll, Op: op, Err: err}
		}
	}
	deadline := time.Now().Add(c.cfg.RetryFor)
	wait := 100 * time.Millisecond
	for {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if within > 0 {
			actx, cancel = context.WithTimeout(ctx, within)
		}
		err := c.once(actx, method, path, body, out)
		cancel()
		var e *Error
		if errors.As(err, &e) {
			e.Op, e.Collection = op, coll
		}
		if err == nil || e == nil || !e.transient() || ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// once tries the nodes in turn while the failure is a connection error.
func (c *Client) once(ctx context.Context, method, path string, body []byte, out any) error {
	c.mu.Lock()
	start := c.live
	c.mu.Unlock()
	var last error
	for i := range c.cfg.URLs {
		n := (start + i) % len(c.cfg.URLs)
		err := c.send(ctx, c.cfg.URLs[n]+path, method, body, out)
		if err == nil {
			c.mu.Lock()
			c.live = n
			c.mu.Unlock()
			return nil
		}
		var e *Error
		if !errors.As(err, &e) || e.Status != 0 || ctx.Err() != nil {
			return err
		}
		last = err
	}
	return last
}

// transient reports whether the same request may succeed in a moment.
func (e *Error) transient() bool {
	switch {
	case e.Status == 0, e.Status >= 500, e.Status == http.StatusTooManyRequests:
		return true
	case e.Status == http.StatusForbidden && strings.Contains(e.Msg, "rpc error"):
		return true // a Raft query failing over (leader election), not a refusal
	}
	return false
}

func (c *Client) send(ctx context.Context, u, method string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return &Error{URL: u, Err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &Error{URL: u, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return &Error{URL: u, Status: resp.StatusCode, Err: err}
	}
	if resp.StatusCode >= 300 {
		e := &Error{URL: u, Status: resp.StatusCode, Msg: errorMessage(data)}
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			e.Err = ErrUnauthorized
		case http.StatusForbidden:
			if strings.Contains(e.Msg, "rpc error") {
				e.Err = errors.New("cluster not ready (Raft)")
			} else {
				e.Err = ErrUnauthorized
			}
		case http.StatusNotFound:
			e.Err = ErrNotFound
		default:
			e.Err = errors.New(http.StatusText(resp.StatusCode))
		}
		return e
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return &Error{URL: u, Status: resp.StatusCode, Msg: "unreadable answer", Err: err}
		}
	}
	return nil
}

// errorMessage extracts Weaviate's message from an error body.
func errorMessage(data []byte) string {
	var e struct {
		Error []struct {
			Message string `json:"message"`
		} `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &e) == nil {
		var msgs []string
		for _, m := range e.Error {
			msgs = append(msgs, m.Message)
		}
		if e.Message != "" {
			msgs = append(msgs, e.Message)
		}
		if len(msgs) > 0 {
			return strings.Join(msgs, "; ")
		}
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// marshal is json.Marshal without HTML escaping (GraphQL reads the bytes).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Ready reports whether every node answers its readiness probe (which
// needs no key).
func (c *Client) Ready(ctx context.Context) error {
	ctx = safe.Ctx(ctx)
	for _, u := range c.cfg.URLs {
		if err := c.send(ctx, u+"/v1/.well-known/ready", http.MethodGet, nil, nil); err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.Op = "readiness probe"
			}
			return err
		}
	}
	return nil
}
