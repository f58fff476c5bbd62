package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/clip"
)

// SearchRequest is the body of POST /v1/search.
type SearchRequest struct {
	Query        string             `json:"query"`
	K            int                `json:"k,omitempty"`    // default 10
	Mode         string             `json:"mode,omitempty"` // lexical, dense, hybrid (default), rerank
	Fusion       string             `json:"fusion,omitempty"`
	Weights      map[string]float64 `json:"weights,omitempty"`
	Filter       json.RawMessage    `json:"filter,omitempty"` // the JSON filter language (engine.ParseFilter)
	Snippets     bool               `json:"snippets,omitempty"`
	SnippetSize  int                `json:"snippet_size,omitempty"`
	Explain      bool               `json:"explain,omitempty"`
	Rerank       bool               `json:"rerank,omitempty"`        // the same as mode "rerank"
	RerankFusion *bool              `json:"rerank_fusion,omitempty"` // default: how the reranker was measured to help
	Depth        int                `json:"depth,omitempty"`
	IncludeText  bool               `json:"include_text,omitempty"` // each hit's whole text
}

// SearchResponse is the answer of POST /v1/search.
type SearchResponse struct {
	Hits     []Hit    `json:"hits"`
	Warnings []string `json:"warnings,omitempty"`
}

// Hit is one result.
type Hit struct {
	Rank     int                     `json:"rank"`
	ID       string                  `json:"id"`
	Score    float64                 `json:"score"`
	Title    string                  `json:"title,omitempty"`
	Text     string                  `json:"text,omitempty"`
	Metadata map[string]engine.Value `json:"metadata,omitempty"`
	Location *Location               `json:"location,omitempty"` // where in its file (a folder's documents)
	Snippet  *Snippet                `json:"snippet,omitempty"`
	Explain  []Contribution          `json:"explain,omitempty"`
}

// Snippet is the matching fragment; offsets are bytes of the hit's text,
// highlights are [start, end) byte ranges of it.
type Snippet struct {
	Text       string   `json:"text"`
	Start      int      `json:"start"`
	End        int      `json:"end"`
	Highlights [][2]int `json:"highlights"`
	Source     string   `json:"source"`
	More       bool     `json:"more"` // the text goes on after End
}

// Contribution is one list's part in a hit (engine.Contribution).
type Contribution struct {
	List  string  `json:"list"`
	Rank  int     `json:"rank"`
	Score float64 `json:"score"`
	Fused float64 `json:"fused,omitempty"`
}

func badRequest(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, "invalid_request", format, args...)
}

func overLimit(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, "limit_exceeded", format, args...)
}

// noReranker is the 400 of a rerank on a server without a reranker
// (Options.Reranker: its hint).
func noReranker(what string) *apiError {
	return errorf(http.StatusBadRequest, "unsupported", "%s (Options.Reranker)", what).with(hint.Action{Kind: hint.SetOption, Option: "server.Options.Reranker"})
}

// searchOptions checks req and turns it into the engine's options.
func (s *Server) searchOptions(req *SearchRequest) (engine.SearchOptions, error) {
	var opts engine.SearchOptions
	if strings.TrimSpace(req.Query) == "" {
		return opts, badRequest("query: %v", engine.ErrEmptyQuery)
	}
	if len(req.Query) > s.lim.MaxQueryBytes {
		return opts, overLimit("query: %d bytes, over the limit of %d", len(req.Query), s.lim.MaxQueryBytes)
	}
	if req.K < 0 || req.Depth < 0 || req.SnippetSize < 0 {
		return opts, badRequest("k, depth and snippet_size must not be negative")
	}
	if req.K > s.lim.MaxK {
		return opts, overLimit("k: %d, over the limit of %d", req.K, s.lim.MaxK)
	}
	if req.Depth > 10*s.lim.MaxK {
		return opts, overLimit("depth: %d, over the limit of %d", req.Depth, 10*s.lim.MaxK)
	}
	if req.SnippetSize > s.lim.MaxSnippetSize {
		return opts, overLimit("snippet_size: %d, over the limit of %d", req.SnippetSize, s.lim.MaxSnippetSize)
	}
	m, err := engine.ParseMode(req.Mode)
	if err != nil {
		return opts, badRequest("mode: %v", err)
	}
	if req.Rerank {
		if req.Mode != "" && m != engine.ModeRerank {
			return opts, badRequest("rerank: true with mode %s: give one of them", clip.Quote(req.Mode))
		}
		m = engine.ModeRerank
	}
	fu, err := engine.ParseFusion(req.Fusion)
	if err != nil {
		return opts, badRequest("fusion: %v", err)
	}
	if req.Fusion == "" {
		fu = ""
	}
	opts = engine.SearchOptions{Mode: m, K: req.K, Depth: req.Depth, Fusion: fu, Weights: req.Weights,
		Snippets: req.Snippets, SnippetSize: req.SnippetSize, RerankFusion: s.opts.RerankFusion}
	if req.RerankFusion != nil {
		opts.RerankFusion = *req.RerankFusion
	}
	if opts.K == 0 {
		opts.K = 10
	}
	if opts.Depth != 0 && opts.Depth < opts.K {
		return opts, badRequest("depth (%d) must be at least k (%d)", opts.Depth, opts.K)
	}
	if raw := bytes.TrimSpace(req.Filter); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		f, err := engine.ParseFilter(raw)
		if err != nil {
			return opts, badRequest("%v", err)
		}
		if err := f.Validate(); err != nil {
			return opts, badRequest("filter: %v", err)
		}
		opts.Filter = f
	}
	return opts, nil
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	var req SearchRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	opts, err := s.searchOptions(&req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if opts.Mode == engine.ModeRerank && s.opts.Reranker == nil {
		s.fail(w, r, noReranker("mode rerank: this server has no reranker"))
		return
	}
	res, err := s.eng.Search(r.Context(), req.Query, opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := SearchResponse{Hits: make([]Hit, 0, len(res))}
	if unknown, err := s.eng.UnknownKeys(opts.Filter); err == nil && len(unknown) > 0 {
		q := make([]string, len(unknown))
		for i, k := range unknown {
			q[i] = clip.Quote(k)
		}
		out.Warnings = append(out.Warnings, fmt.Sprintf("no document has the metadata key %s: the filter %s cannot match on it", clip.Bytes(strings.Join(q, ", "), 1024), clip.Bytes(opts.Filter.String(), 1024)))
	}
	for i, res := range res {
		h := Hit{Rank: i + 1, ID: res.ID, Score: res.Score, Title: res.Title, Metadata: metadataOf(res.Meta, res.MetaValues)}
		if l := res.Location; l != nil {
			h.Location = &Location{Location: *l, Label: l.String()}
		}
		if req.IncludeText {
			h.Text = res.Text
		}
		if req.Explain {
			for _, c := range res.Explain {
				h.Explain = append(h.Explain, Contribution{List: c.List, Rank: c.Rank, Score: c.Score, Fused: c.Fused})
			}
		}
		if sn := res.Snippet; sn != nil {
			h.Snippet = &Snippet{Text: sn.Text, Start: sn.Start, End: sn.End, Highlights: [][2]int{}, Source: sn.Source, More: sn.End < len(res.Text)}
			for _, hl := range sn.Highlights {
				h.Snippet.Highlights = append(h.Snippet.Highlights, [2]int{hl.Start, hl.End})
			}
		}
		out.Hits = append(out.Hits, h)
	}
	writeJSON(w, http.StatusOK, out)
}

// Location is where in its file a hit lies: path, page, start_line,
// end_line and section as the document's metadata says (engine.Location),
// and label, the same as one line ("notes/plan.pdf:page 3",
// "engine/write.go:68-120").
type Location struct {
	engine.Location
	Label string `json:"label"`
}

// metadataOf is a document's metadata as annactl index reads it:
// strings, numbers and lists under one object.
func metadataOf(meta map[string]string, values map[string]engine.Value) map[string]engine.Value {
	if len(meta)+len(values) == 0 {
		return nil
	}
	m := make(map[string]engine.Value, len(meta)+len(values))
	for k, v := range meta {
		m[k] = engine.StringValue(v)
	}
	maps.Copy(m, values)
	return m
}

// AddResponse is the answer of POST /v1/documents: the batch is committed.
type AddResponse struct {
	Added     int      `json:"added"`
	Updated   int      `json:"updated"`
	Unchanged int      `json:"unchanged"`
	Committed bool     `json:"committed"`
	Warnings  []string `json:"warnings,omitempty"`
}

// readDocuments reads the batch of POST /v1/documents: {"documents":
// [...]} (application/json), or one document per line
// (application/x-ndjson, application/jsonl), each by the rules of
// annactl index's input (package beir).
func (s *Server) readDocuments(r *http.Request) ([]engine.Document, []string, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var body io.Reader
	name := "documents"
	switch ct {
	case "application/x-ndjson", "application/jsonl", "application/json-lines":
		body, name = r.Body, "body"
	case "", "application/json":
		var req struct {
			Documents []json.RawMessage `json:"documents"`
		}
		if err := decode(r, &req); err != nil {
			return nil, nil, err
		}
		if req.Documents == nil {
			return nil, nil, badRequest(`field "documents": missing (want {"documents": [{"id", "title", "text", "metadata"}, ...]})`)
		}
		if len(req.Documents) > s.lim.MaxBatch {
			return nil, nil, overLimit("documents: %d in one request, over the limit of %d", len(req.Documents), s.lim.MaxBatch)
		}
		// One compact line per document: line N is documents[N-1].
		var b bytes.Buffer
		for _, d := range req.Documents {
			if err := json.Compact(&b, d); err != nil {
				return nil, nil, badRequest("documents: %v", err)
			}
			b.WriteByte('\n')
		}
		body = &b
	default:
		return nil, nil, errorf(http.StatusUnsupportedMediaType, "invalid_request", "Content-Type %q: want application/json or application/x-ndjson", ct)
	}
	var docs []engine.Document
	var warnings []string
	err := beir.ReadCorpusWith(body, name, beir.CorpusOptions{OnUnknownField: func(_ int, _, warning string) {
		warnings = append(warnings, strings.TrimPrefix(warning, "beir: "))
	}}, func(line int, d beir.Doc) error {
		if len(docs) >= s.lim.MaxBatch {
			return overLimit("documents: more than %d in one request, the limit", s.lim.MaxBatch)
		}
		if engine.IsEmpty(engine.Document(d)) {
			return badRequest("%s:%d: document %s: %v", name, line, clip.Quote(d.ID), engine.ErrEmptyDocument)
		}
		docs = append(docs, engine.Document(d))
		return nil
	})
	if err != nil {
		var ae *apiError
		var mbe *http.MaxBytesError
		if errors.As(err, &ae) || errors.As(err, &mbe) {
			return nil, nil, err
		}
		return nil, nil, badRequest("%s", strings.TrimPrefix(err.Error(), "beir: "))
	}
	if len(docs) == 0 {
		return nil, nil, badRequest("documents: none given")
	}
	return docs, warnings, nil
}

func (s *Server) addDocuments(w http.ResponseWriter, r *http.Request) {
	docs, warnings, err := s.readDocuments(r)
	if err == nil {
		err = s.checkDocuments(r.Context(), docs)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.eng.Add(r.Context(), docs)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.metrics.docsWritten.Add(float64(res.Added + res.Updated))
	writeJSON(w, http.StatusOK, AddResponse{Added: res.Added, Updated: res.Updated, Unchanged: res.Unchanged, Committed: res.Committed, Warnings: warnings})
}

// DocumentJSON is a stored document, in annactl index's input fields.
type DocumentJSON struct {
	ID       string                  `json:"id"`
	Title    string                  `json:"title,omitempty"`
	Text     string                  `json:"text"`
	Metadata map[string]engine.Value `json:"metadata,omitempty"`
}

func (s *Server) getDocument(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	docs, err := s.eng.Get(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(docs) == 0 {
		s.fail(w, r, errorf(http.StatusNotFound, "not_found", "document %s: not found", clip.Quote(id)))
		return
	}
	d := docs[0]
	writeJSON(w, http.StatusOK, DocumentJSON{ID: d.ID, Title: d.Title, Text: d.Text, Metadata: metadataOf(d.Meta, d.MetaValues)})
}

func (s *Server) deleteDocument(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	n, err := s.eng.Delete(r.Context(), []string{id})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if n == 0 {
		s.fail(w, r, errorf(http.StatusNotFound, "not_found", "document %s: not found", clip.Quote(id)))
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
}

// StatsResponse is the answer of GET /v1/stats.
type StatsResponse struct {
	Documents     int      `json:"documents"`
	Seq           uint64   `json:"seq"`
	Model         string   `json:"model"`
	Fingerprint   string   `json:"fingerprint"`
	Dim           int      `json:"dim"`
	LexicalDocs   uint64   `json:"lexical_docs"`
	DenseDocs     int      `json:"dense_docs"`
	DensePassages int      `json:"dense_passages"`
	Chunking      string   `json:"chunking"`
	Fusion        string   `json:"fusion"`
	Reranker      bool     `json:"reranker"`
	ReadOnly      bool     `json:"read_only"`
	Backend       string   `json:"backend"`
	Modes         []string `json:"modes"`
	Warnings      []string `json:"warnings,omitempty"`
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	st, err := s.eng.Stats()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	modes := []string{"lexical", "dense", "hybrid"}
	if s.opts.Reranker != nil {
		modes = append(modes, "rerank")
	}
	writeJSON(w, http.StatusOK, StatsResponse{Documents: st.Documents, Seq: st.Seq, Model: st.Model.Name, Fingerprint: st.Model.Fingerprint,
		Dim: st.Model.Dim, LexicalDocs: st.LexicalDocs, DenseDocs: st.DenseDocs, DensePassages: st.DensePassages,
		Chunking: st.Chunking.String(), Fusion: string(st.Fusion), Reranker: s.opts.Reranker != nil, ReadOnly: st.ReadOnly || s.opts.ReadOnly,
		Backend: st.Backend, Modes: slices.Clip(modes), Warnings: st.Warnings})
}

// MetadataResponse is the answer of GET /v1/metadata: the metadata keys of
// the documents, for filters (the search page offers them).
type MetadataResponse struct {
	Keys []MetadataKey `json:"keys"`
}

// MetadataKey is one key: its distinct values, the most common string
// values, the range of its numbers.
type MetadataKey struct {
	Key     string          `json:"key"`
	Values  int             `json:"values"`
	Numeric bool            `json:"numeric,omitempty"`
	Min     *float64        `json:"min,omitempty"`
	Max     *float64        `json:"max,omitempty"`
	Top     []MetadataValue `json:"top,omitempty"`
}

// MetadataValue is a value and how many documents hold it.
type MetadataValue struct {
	Value     string `json:"value"`
	Documents int    `json:"documents"`
}

// maxMetadataTop bounds GET /v1/metadata's top.
const maxMetadataTop = 100

func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	top := 10
	if v := r.URL.Query().Get("top"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxMetadataTop {
			s.fail(w, r, badRequest("top %s: want 0 to %d", clip.Quote(v), maxMetadataTop))
			return
		}
		top = n
	}
	keys, err := s.eng.MetadataKeys(r.Context(), top)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := MetadataResponse{Keys: make([]MetadataKey, 0, len(keys))}
	for _, k := range keys {
		mk := MetadataKey{Key: k.Key, Values: k.Values, Numeric: k.Numeric}
		if k.Numeric {
			mk.Min, mk.Max = &k.Min, &k.Max
		}
		for _, v := range k.Top {
			mk.Top = append(mk.Top, MetadataValue{Value: v.Value, Documents: v.Documents})
		}
		out.Keys = append(out.Keys, mk)
	}
	writeJSON(w, http.StatusOK, out)
}
