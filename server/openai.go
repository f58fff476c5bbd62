package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"sort"
	"strings"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/rerank"
	"github.com/anna-search/anna/tokenizer"
)

// EmbeddingsRequest is OpenAI's POST /v1/embeddings body.
type EmbeddingsRequest struct {
	Input          json.RawMessage `json:"input"`
	Model          string          `json:"model"`
	EncodingFormat string          `json:"encoding_format,omitempty"` // float (default) or base64
	Dimensions     *int            `json:"dimensions,omitempty"`
	User           string          `json:"user,omitempty"`
}

// Embedding is one vector of the answer: a []float32 or, with
// encoding_format base64, its little-endian float32 bytes in base64.
type Embedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

// EmbeddingsResponse is OpenAI's answer.
type EmbeddingsResponse struct {
	Object string      `json:"object"`
	Data   []Embedding `json:"data"`
	Model  string      `json:"model"`
	Usage  Usage       `json:"usage"`
}

// Usage counts the model tokens read (special tokens included, after
// truncation to the model's length).
type Usage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// embedJob is one request's texts for the embedding batcher.
type embedJob struct {
	ctx    context.Context
	texts  []string
	tokens int
	ans    *answer[[][]float32]
}

func (j embedJob) size() (int, int)         { return len(j.texts), j.tokens }
func (j embedJob) context() context.Context { return j.ctx }
func (j embedJob) fail(err error)           { j.ans.send(nil, err) }

// tokenCounter counts a text's model tokens with the model's tokenizer.
type tokenCounter struct {
	tok    *tokenizer.Tokenizer
	maxLen int
}

func (t *tokenCounter) count(text string) int {
	if t == nil || t.tok == nil {
		return 0
	}
	return len(t.tok.Encode(text, t.maxLen).IDs)
}

func (t *tokenCounter) close() {
	if t != nil && t.tok != nil {
		t.tok.Close()
	}
}

// embedderFor returns the embedding batcher, loading the engine's model
// the first time.
func (s *Server) embedderFor(ctx context.Context) (*batcher[embedJob], error) {
	s.embedMu.Lock()
	defer s.embedMu.Unlock()
	if s.embedder != nil {
		return s.embedder, nil
	}
	if err := s.base.Err(); err != nil {
		return nil, err
	}
	enc, err := s.eng.LoadEncoder(ctx)
	if err != nil {
		return nil, err // tried again by the next request
	}
	s.tokens = loadTokenCounter(s.eng.Model(), enc)
	s.embedder = newBatcher(s.base, s.opts.BatchWait, s.opts.BatchTexts, s.opts.BatchTokens,
		func(ctx context.Context, jobs []embedJob) { runEmbed(ctx, enc, jobs) }, s.metrics.batchObserver("embeddings"))
	return s.embedder, nil
}

// loadTokenCounter loads the model's tokenizer.json for usage and batch
// sizes; nil (counting 0) when the model has none.
func loadTokenCounter(m engine.Model, enc encoder.Encoder) *tokenCounter {
	dir := m.Dir
	if dir == "" {
		dir = home.DefaultEmbedModel() // the tokenizer of both the default model's forms
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil
	}
	maxLen := 512
	if sp, ok := encoder.SplitterOf(enc); ok {
		maxLen = sp.MaxLength()
	}
	return &tokenCounter{tok: tok, maxLen: maxLen}
}

// runEmbed embeds the texts of jobs in one EmbedDocuments call and hands
// each job its vectors.
func runEmbed(ctx context.Context, enc encoder.Encoder, jobs []embedJob) {
	callOnce(jobs, func(j embedJob) []string { return j.texts }, func(j embedJob) *answer[[][]float32] { return j.ans },
		func(all []string) ([][]float32, error) { return enc.EmbedDocuments(ctx, all) },
		"the encoder returned %d vectors for %d texts")
}

// callOnce makes one call over the jobs' inputs put end to end and sends
// each job its own outputs (as many as its inputs, in order). A call that
// fails, or that returns another number of outputs than it was given
// inputs (mismatch formats the two counts), fails every job.
func callOnce[J, I, T any](jobs []J, in func(J) []I, ans func(J) *answer[[]T], call func([]I) ([]T, error), mismatch string) {
	var all []I
	for _, j := range jobs {
		all = append(all, in(j)...)
	}
	out, err := call(all)
	if err == nil && len(out) != len(all) {
		err = fmt.Errorf(mismatch, len(out), len(all))
	}
	at := 0
	for _, j := range jobs {
		if err != nil {
			ans(j).send(nil, err)
			continue
		}
		n := len(in(j))
		ans(j).send(out[at:at+n], nil)
		at += n
	}
}

// readInput reads OpenAI's input: a string or an array of strings. Token
// arrays are refused: the server embeds text with its own tokenizer.
func readInput(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, badRequest(`field "input": missing (want a string or an array of strings)`)
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []json.RawMessage
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest(`field "input": want a string or an array of strings`)
	}
	if len(many) == 0 {
		return nil, badRequest(`field "input": an empty array`)
	}
	out := make([]string, len(many))
	for i, m := range many {
		if err := json.Unmarshal(m, &out[i]); err != nil {
			return nil, badRequest(`field "input[%d]": want a string (token arrays are not supported: send the text)`, i)
		}
	}
	return out, nil
}

// modelName is the name the served model answers to in the OpenAI and
// Cohere dialects: its manifest name, else its fingerprint.
func (s *Server) modelName() string {
	m := s.eng.Model()
	if m.Name != "" {
		return m.Name
	}
	return m.Fingerprint
}

// checkModel refuses a model other than the one served (by manifest name,
// label or fingerprint, 12 hex digits or more); "" is the one served.
func (s *Server) checkModel(name string) error {
	m := s.eng.Model()
	if name == "" || name == m.Name || name == m.Label() || (len(name) >= 12 && strings.HasPrefix(m.Fingerprint, name)) {
		return nil
	}
	return errorf(http.StatusNotFound, "model_not_found", "model %q: this server embeds with %s only", name, m.Label())
}

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	var req EmbeddingsRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	texts, err := readInput(req.Input)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(texts) > s.lim.MaxInputs {
		s.fail(w, r, overLimit("input: %d texts, over the limit of %d", len(texts), s.lim.MaxInputs))
		return
	}
	for i, t := range texts {
		if len(t) > s.lim.MaxBodyBytes32() {
			s.fail(w, r, overLimit("input[%d]: too long", i))
			return
		}
		if strings.TrimSpace(t) == "" {
			s.fail(w, r, badRequest("input[%d]: empty text", i))
			return
		}
	}
	switch req.EncodingFormat {
	case "", "float", "base64":
	default:
		s.fail(w, r, badRequest("encoding_format %q: want float or base64", req.EncodingFormat))
		return
	}
	b, err := s.embedderFor(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.checkModel(req.Model); err != nil {
		s.fail(w, r, err)
		return
	}
	dim := s.eng.Model().Dim
	if req.Dimensions != nil && *req.Dimensions != dim {
		s.fail(w, r, badRequest("dimensions %d: %s gives %d-dimensional vectors and cannot shorten them", *req.Dimensions, s.eng.Model().Label(), dim))
		return
	}
	tokens := 0
	for _, t := range texts {
		tokens += s.tokens.count(t)
	}
	j := embedJob{ctx: r.Context(), texts: texts, tokens: tokens, ans: newAnswer[[][]float32]()}
	vecs, err := roundTrip(r.Context(), b, j, j.ans)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := EmbeddingsResponse{Object: "list", Data: make([]Embedding, len(vecs)), Model: s.modelName(), Usage: Usage{tokens, tokens}}
	for i, v := range vecs {
		out.Data[i] = Embedding{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			buf := make([]byte, 4*len(v))
			for k, x := range v {
				binary.LittleEndian.PutUint32(buf[4*k:], math.Float32bits(x))
			}
			out.Data[i].Embedding = base64.StdEncoding.EncodeToString(buf)
		}
	}
	s.metrics.embedded.Add(float64(len(texts)))
	writeJSON(w, http.StatusOK, out)
}

// MaxBodyBytes32 is the body limit as an int (a text cannot be longer).
func (l Limits) MaxBodyBytes32() int { return int(min(l.MaxBodyBytes, math.MaxInt32)) }

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	data := []model{{ID: s.modelName(), Object: "model", OwnedBy: "anna"}}
	if s.opts.Reranker != nil && s.opts.RerankerName != "" {
		data = append(data, model{ID: s.opts.RerankerName, Object: "model", OwnedBy: "anna"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// RerankRequest is Cohere's (and Jina's) POST /v1/rerank body.
type RerankRequest struct {
	Query           string            `json:"query"`
	Documents       []json.RawMessage `json:"documents"` // strings, or objects with "text"
	TopN            *int              `json:"top_n,omitempty"`
	Model           string            `json:"model,omitempty"`
	ReturnDocuments bool              `json:"return_documents,omitempty"`
}

// RerankResult is one document's score, by its index in the request.
type RerankResult struct {
	Index          int     `json:"index"`
	RelevanceScore float64 `json:"relevance_score"`
	Document       *struct {
		Text string `json:"text"`
	} `json:"document,omitempty"`
}

// RerankResponse is the answer, best first.
type RerankResponse struct {
	Results []RerankResult `json:"results"`
	Model   string         `json:"model,omitempty"`
}

// rerankJob is one request for the rerank batcher: its pairs and their
// model tokens (0 when the reranker does not count them).
type rerankJob struct {
	ctx    context.Context
	pairs  []rerank.Pair
	tokens int
	ans    *answer[[]float32]
}

func (j rerankJob) size() (int, int)         { return len(j.pairs), j.tokens }
func (j rerankJob) context() context.Context { return j.ctx }
func (j rerankJob) fail(err error)           { j.ans.send(nil, err) }

// pairTokens counts a pair's model tokens: rerank.ORTReranker.PairTokens.
type pairTokens interface{ PairTokens(rerank.Pair) int }

// runRerank scores the pairs of every job of a batch, whatever their
// queries, in one rerank.ScorePairs call (one ScorePairs call of the
// reranker when it is a rerank.PairScorer, else one Score call per
// distinct query) and hands each job its scores.
func (s *Server) runRerank(ctx context.Context, jobs []rerankJob) {
	callOnce(jobs, func(j rerankJob) []rerank.Pair { return j.pairs }, func(j rerankJob) *answer[[]float32] { return j.ans },
		func(pairs []rerank.Pair) ([]float32, error) { return safeScorePairs(ctx, s.opts.Reranker, pairs) },
		"the reranker returned %d scores for %d documents")
}

// safeScorePairs is rerank.ScorePairs with a panic returned as an error.
func safeScorePairs(ctx context.Context, r rerank.Reranker, pairs []rerank.Pair) (scores []float32, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("reranker panicked: %v", p)
		}
	}()
	return rerank.ScorePairs(ctx, r, pairs)
}

func (s *Server) rerank(w http.ResponseWriter, r *http.Request) {
	var req RerankRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.opts.Reranker == nil {
		s.fail(w, r, errorf(http.StatusNotImplemented, "unsupported", "this server has no reranker (annactl serve --reranker NAME|DIR)"))
		return
	}
	if req.Model != "" && req.Model != s.opts.RerankerName {
		s.fail(w, r, errorf(http.StatusNotFound, "model_not_found", "model %q: this server reranks with %q only", req.Model, s.opts.RerankerName))
		return
	}
	if strings.TrimSpace(req.Query) == "" {
		s.fail(w, r, badRequest("query: %v", engine.ErrEmptyQuery))
		return
	}
	if len(req.Query) > s.lim.MaxQueryBytes {
		s.fail(w, r, overLimit("query: %d bytes, over the limit of %d", len(req.Query), s.lim.MaxQueryBytes))
		return
	}
	if len(req.Documents) == 0 {
		s.fail(w, r, badRequest(`field "documents": missing or empty (want an array of strings)`))
		return
	}
	if len(req.Documents) > s.lim.MaxInputs {
		s.fail(w, r, overLimit("documents: %d, over the limit of %d", len(req.Documents), s.lim.MaxInputs))
		return
	}
	docs := make([]string, len(req.Documents))
	for i, raw := range req.Documents {
		if err := json.Unmarshal(raw, &docs[i]); err == nil {
			continue
		}
		var obj struct {
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil || obj.Text == nil {
			s.fail(w, r, badRequest(`field "documents[%d]": want a string or {"text": "..."}`, i))
			return
		}
		docs[i] = *obj.Text
	}
	topN := len(docs)
	if req.TopN != nil {
		if *req.TopN < 1 {
			s.fail(w, r, badRequest("top_n: %d, want at least 1", *req.TopN))
			return
		}
		topN = min(*req.TopN, len(docs))
	}
	j := rerankJob{ctx: r.Context(), pairs: make([]rerank.Pair, len(docs)), ans: newAnswer[[]float32]()}
	pt, counts := s.opts.Reranker.(pairTokens)
	for i, d := range docs {
		j.pairs[i] = rerank.Pair{Query: req.Query, Doc: d}
		if counts {
			j.tokens += pt.PairTokens(j.pairs[i])
		}
	}
	scores, err := roundTrip(r.Context(), s.rerankB, j, j.ans)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	results := make([]RerankResult, len(docs))
	for i, sc := range scores {
		// Cohere's relevance_score is in [0, 1]: the logistic of the
		// cross-encoder's logit, which keeps its order.
		results[i] = RerankResult{Index: i, RelevanceScore: 1 / (1 + math.Exp(-float64(sc)))}
		if req.ReturnDocuments {
			results[i].Document = &struct {
				Text string `json:"text"`
			}{docs[i]}
		}
	}
	sort.SliceStable(results, func(a, b int) bool { return scores[results[a].Index] > scores[results[b].Index] })
	writeJSON(w, http.StatusOK, RerankResponse{Results: results[:topN], Model: s.opts.RerankerName})
}
