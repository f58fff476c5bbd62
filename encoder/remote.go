package encoder

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model"
)

// RemoteKeyEnv names the environment variable a remote model's API key is
// read from when RemoteOptions.APIKey is empty (never part of the model's
// spec, which an index records).
const RemoteKeyEnv = "ANNA_MODEL_API_KEY"

// RemoteOptions configure a RemoteEncoder. Zero fields take the defaults.
type RemoteOptions struct {
	// APIKey is sent as "Authorization: Bearer KEY" (default: $ANNA_MODEL_API_KEY).
	APIKey string
	// Batch is the most texts one request carries (default 32, what
	// text-embeddings-inference accepts unless told more).
	Batch int
	// Parallel is the most requests in flight at once (default 4).
	Parallel int
	// Timeout bounds one request, retries apart (default 60 s).
	Timeout time.Duration
	// Retries is how many times a request that failed for a reason that
	// may pass (a refused or broken connection, 429, 500, 502, 503, 504, a
	// timeout) is sent again, waiting Backoff, then twice as long each
	// time (up to 8 s), or what the server's Retry-After says (default 3;
	// negative: none).
	Retries int
	// Backoff is the first wait before a retry (default 0.5 s).
	Backoff time.Duration
	// HTTPClient, when set, sends the requests (its Timeout is left alone).
	HTTPClient *http.Client
}

func (o RemoteOptions) withDefaults() RemoteOptions {
	if o.APIKey == "" {
		o.APIKey = strings.TrimSpace(os.Getenv(RemoteKeyEnv))
	}
	if o.Batch <= 0 {
		o.Batch = 32
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Retries == 0 {
		o.Retries = 3
	}
	if o.Backoff <= 0 {
		o.Backoff = 500 * time.Millisecond
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute}}
	}
	return o
}

// RemoteEncoder embeds with a model another server runs, through an
// OpenAI-compatible POST /v1/embeddings: text-embeddings-inference,
// Ollama, llama.cpp's server, vLLM, OpenAI, another anna. Its spec is
// "URL#NAME": the server's base URL (…/v1, or the embeddings route
// itself) and the model's name there.
//
// Invariants: its fingerprint is a hash of the name and the dimension
// (what an index records: another name or dimension is another model,
// refused by an index bound to this one; the URL may change). Vectors are
// L2-normalised here (cosine = dot product, as every anna model). A call
// sends its texts in requests of Batch, Parallel at a time, in order; it
// fails whole (no partial result) on an error that retries do not cure,
// naming the server's answer. Documents and queries are sent as they are:
// a model that wants prefixes ("query: ") needs them in the text. Long
// documents are not split (no tokenizer here): the server truncates them
// or refuses (text-embeddings-inference: run it with --auto-truncate).
type RemoteEncoder struct {
	url, name string
	opts      RemoteOptions
	dim       int
	fp        string
}

// Closer is an Encoder that holds what Close releases (an ONNX Runtime
// session, connections).
type Closer interface {
	Encoder
	Close() error
}

// Open loads the model spec names: a model directory (Load, with opts; an
// ensemble's, LoadEnsemble), or a model another server runs, "URL#NAME" (OpenRemote, with $ANNA_MODEL_API_KEY).
func Open(ctx context.Context, spec string, opts Options) (Closer, error) {
	ctx = safe.Ctx(ctx)
	if IsRemote(spec) {
		return OpenRemote(ctx, spec, RemoteOptions{})
	}
	if man, err := model.LoadManifest(spec); err == nil && man.Ensemble != nil {
		return loadEnsemble(ctx, spec, man, opts)
	}
	return Load(ctx, spec, opts)
}

// IsRemote reports whether spec names a remote model (an http:// or
// https:// URL) rather than a model directory.
func IsRemote(spec string) bool {
	return strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://")
}

// ParseRemote splits a remote model's spec "URL#NAME" into the embeddings
// route's URL and the model's name.
func ParseRemote(spec string) (endpoint, name string, err error) {
	raw, name, ok := strings.Cut(spec, "#")
	if !ok || strings.TrimSpace(name) == "" {
		return "", "", fmt.Errorf("encoder: remote model %q: want URL#NAME, the server's URL and the model's name there (http://127.0.0.1:8080/v1#bge-small-en-v1.5)", spec)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", fmt.Errorf("encoder: remote model %q: %q is not an http(s) URL", spec, raw)
	}
	if u.User != nil {
		return "", "", fmt.Errorf("encoder: remote model %q: no credentials in the URL (an index records it): put the key in $%s", spec, RemoteKeyEnv)
	}
	p := strings.TrimSuffix(u.Path, "/")
	switch {
	case strings.HasSuffix(p, "/embeddings"):
	case p == "":
		p = "/v1/embeddings"
	default:
		p += "/embeddings"
	}
	u.Path, u.RawQuery, u.Fragment = p, "", ""
	return u.String(), name, nil
}

// OpenRemote returns the encoder of the remote model spec ("URL#NAME"),
// after one request that learns its dimension (and that the server
// answers).
func OpenRemote(ctx context.Context, spec string, opts RemoteOptions) (_ *RemoteEncoder, err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	endpoint, name, err := ParseRemote(spec)
	if err != nil {
		return nil, err
	}
	r := &RemoteEncoder{url: endpoint, name: name, opts: opts.withDefaults()}
	vecs, err := r.request(ctx, []string{"anna"})
	if err != nil {
		return nil, err
	}
	r.dim = len(vecs[0])
	if r.dim == 0 {
		return nil, fmt.Errorf("encoder: %s: model %q answered an empty vector", r.url, name)
	}
	r.fp = RemoteFingerprint(name, r.dim)
	return r, nil
}

// RemoteFingerprint is the fingerprint of the remote model name of
// dimension dim.
func RemoteFingerprint(name string, dim int) string {
	h := sha256.Sum256([]byte("anna remote embeddings\x00" + name + "\x00" + strconv.Itoa(dim)))
	return hex.EncodeToString(h[:])
}

// Dim is the model's vector width.
func (r *RemoteEncoder) Dim() int { return r.dim }

// Fingerprint names the model by its name and dimension.
func (r *RemoteEncoder) Fingerprint() string { return r.fp }

// Name is the model's name on its server.
func (r *RemoteEncoder) Name() string { return r.name }

// URL is the embeddings route requests go to.
func (r *RemoteEncoder) URL() string { return r.url }

// Manifest describes the remote model the way an installed model's
// manifest does (name, task, dimension, fingerprint; Source is the URL).
func (r *RemoteEncoder) Manifest() *model.Manifest {
	return &model.Manifest{Name: r.name, Task: model.TaskEmbed, Dim: r.dim, Normalize: true, Fingerprint: r.fp, Source: r.url}
}

// Close releases idle connections.
func (r *RemoteEncoder) Close() error {
	r.opts.HTTPClient.CloseIdleConnections()
	return nil
}

// EmbedDocuments embeds texts as documents.
func (r *RemoteEncoder) EmbedDocuments(ctx context.Context, texts []string) (_ [][]float32, err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	return r.embed(ctx, texts)
}

// EmbedQueries embeds queries, formatted by p with the default
// instruction template when p is not zero.
func (r *RemoteEncoder) EmbedQueries(ctx context.Context, queries []string, p Prompt) (_ [][]float32, err error) {
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if !p.IsZero() {
		q := make([]string, len(queries))
		for i, s := range queries {
			q[i] = FormatQuery(model.DefaultInstructionTemplate, "", p, s)
		}
		queries = q
	}
	return r.embed(ctx, queries)
}

// embed sends texts in batches, Parallel at a time, and puts the vectors
// back in order.
func (r *RemoteEncoder) embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	if len(texts) == 0 {
		return out, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, r.opts.Parallel)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for start := 0; start < len(texts); start += r.opts.Batch {
		part := texts[start:min(start+r.opts.Batch, len(texts))]
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			vecs, err := r.request(ctx, part)
			if err != nil {
				once.Do(func() { first = err; cancel() })
				return
			}
			copy(out[start:], vecs)
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// remoteError is an answer that is not vectors.
type remoteError struct {
	status int
	msg    string
	after  time.Duration // Retry-After
}

func (e *remoteError) Error() string { return e.msg }

// request embeds one batch, retrying what may pass.
func (r *RemoteEncoder) request(ctx context.Context, texts []string) ([][]float32, error) {
	body, err := json.Marshal(map[string]any{"model": r.name, "input": texts, "encoding_format": "float"})
	if err != nil {
		return nil, fmt.Errorf("encoder: %w", err)
	}
	wait := r.opts.Backoff
	for attempt := 0; ; attempt++ {
		vecs, err := r.once(ctx, body, len(texts))
		if err == nil {
			return vecs, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if attempt >= r.opts.Retries || !retryable(err) {
			return nil, fmt.Errorf("encoder: %s (model %q): %w", r.url, r.name, err)
		}
		d := wait
		var re *remoteError
		if errors.As(err, &re) && re.after > 0 {
			d = min(re.after, 30*time.Second)
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		wait = min(2*wait, 8*time.Second)
	}
}

// retryable: a connection that failed, a timeout, or an answer that says
// to come back.
func retryable(err error) bool {
	var re *remoteError
	if errors.As(err, &re) {
		switch re.status {
		case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, context.DeadlineExceeded)
}

// maxAnswer bounds the answer read: 64 MiB holds a batch of 1024 vectors
// of 4096 floats written out.
const maxAnswer = 64 << 20

func (r *RemoteEncoder) once(ctx context.Context, body []byte, n int) ([][]float32, error) {
	rctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if r.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.opts.APIKey)
	}
	resp, err := r.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		re := &remoteError{status: resp.StatusCode, msg: fmt.Sprintf("%s: %s", resp.Status, errorText(raw))}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			re.after = time.Duration(s) * time.Second
		}
		return nil, re
	}
	if len(raw) > maxAnswer {
		return nil, &remoteError{status: -1, msg: fmt.Sprintf("an answer over %d bytes", maxAnswer)}
	}
	var ans struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return nil, &remoteError{status: -1, msg: fmt.Sprintf("not an embeddings answer (%v): %s", err, errorText(raw))}
	}
	if len(ans.Data) != n {
		return nil, &remoteError{status: -1, msg: fmt.Sprintf("%d vectors for %d texts", len(ans.Data), n)}
	}
	out := make([][]float32, n)
	for _, d := range ans.Data {
		if d.Index < 0 || d.Index >= n || out[d.Index] != nil {
			return nil, &remoteError{status: -1, msg: fmt.Sprintf("vector index %d out of place", d.Index)}
		}
		if r.dim != 0 && len(d.Embedding) != r.dim {
			return nil, &remoteError{status: -1, msg: fmt.Sprintf("a %d-dimensional vector from a %d-dimensional model", len(d.Embedding), r.dim)}
		}
		out[d.Index] = normalized(d.Embedding)
	}
	return out, nil
}

// normalized is v as float32, L2-normalised (unchanged when zero).
func normalized(v []float64) []float32 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	out := make([]float32, len(v))
	scale := 1.0
	if s > 0 {
		scale = 1 / math.Sqrt(s)
	}
	for i, x := range v {
		out[i] = float32(x * scale)
	}
	return out
}

// errorText is the message of an error answer, bounded.
func errorText(raw []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &e) == nil && len(e.Error) > 0 {
		var s string
		var obj struct{ Message string }
		switch {
		case json.Unmarshal(e.Error, &s) == nil:
			msg = s
		case json.Unmarshal(e.Error, &obj) == nil && obj.Message != "":
			msg = obj.Message
		}
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return msg
}
