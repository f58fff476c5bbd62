package server

import (
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
	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/clip"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/rerank"
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
	query  bool // embed as queries (the model's query side), else as documents
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
	enc, err := s.eng.Teacher().LoadEncoder(ctx)
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

// runEmbed embeds the texts of jobs in one EmbedDocuments call (and the
// queries among them in one EmbedQueries call) and hands each job its
// vectors.
func runEmbed(ctx context.Context, enc encoder.Encoder, jobs []embedJob) {
	var docs, queries []embedJob
	for _, j := range jobs {
		if j.query {
			queries = append(queries, j)
		} else {
			docs = append(docs, j)
		}
	}
	texts := func(j embedJob) []string { return j.texts }
	ans := func(j embedJob) *answer[[][]float32] { return j.ans }
	if len(docs) > 0 {
		callOnce(docs, texts, ans, func(all []string) ([][]float32, error) { return enc.EmbedDocuments(ctx, all) },
			"the encoder returned %d vectors for %d texts")
	}
	if len(queries) > 0 {
		callOnce(queries, texts, ans, func(all []string) ([][]float32, error) { return enc.EmbedQueries(ctx, all, encoder.Prompt{}) },
			"the encoder returned %d vectors for %d queries")
	}
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
// arrays are refused, naming the fix: the server embeds text with its own
// tokenizer.
func readInput(raw json.RawMessage) ([]string, error) {
	return readTexts("input", raw, ". "+tokenArrayFix)
}

// tokenArrayFix is what a client that sends token IDs does instead.
const tokenArrayFix = "langchain-openai sends token IDs unless told not to: OpenAIEmbeddings(..., check_embedding_ctx_length=False)"

// isTokens reports whether raw is an array of numbers (a token array).
func isTokens(raw json.RawMessage) bool {
	var ids []float64
	return json.Unmarshal(raw, &ids) == nil
}

func isNumber(raw json.RawMessage) bool {
	var x float64
	return json.Unmarshal(raw, &x) == nil
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

// isServedModel reports whether name names the model served (by manifest
// name, label or fingerprint, 12 hex digits or more, with Ollama's
// ":latest" tag or not); "" is the one served.
func (s *Server) isServedModel(name string) bool {
	m := s.eng.Model()
	name = strings.TrimSuffix(name, ":latest")
	return name == "" || name == m.Name || name == m.Label() || name == s.modelName() || (len(name) >= 12 && strings.HasPrefix(m.Fingerprint, name))
}

// checkModel accepts the model a request names for embeddings: with
// Options.StrictModel only the one served, else any name (answered by the
// one model served, the name logged once).
func (s *Server) checkModel(route, name string) error {
	label := s.eng.Model().Label()
	return s.acceptModel(route, name, s.isServedModel(name), "embeds with "+label, label)
}

// checkReranker is checkModel for the reranker's name.
func (s *Server) checkReranker(route, name string) error {
	served := name == "" || name == s.opts.RerankerName
	return s.acceptModel(route, name, served, fmt.Sprintf("reranks with %q", s.opts.RerankerName), s.opts.RerankerName)
}

// acceptModel is the rule of checkModel and checkReranker: a name longer
// than any model's is a 400; the one served (served) passes; another is a
// 404 with Options.StrictModel (the server "does" what), else answered by
// the model served (label), the name logged once.
func (s *Server) acceptModel(route, name string, served bool, does, label string) error {
	if len(name) > maxModelName {
		return badRequest("model: a %d-byte name, longer than any model's (at most %d bytes)", len(name), maxModelName)
	}
	if served {
		return nil
	}
	if s.opts.StrictModel {
		return errorf(http.StatusNotFound, "model_not_found", "model %s: this server %s only (it refuses other model names: %s)", clip.Quote(name), does, s.optionText(strictOff)).
			with(strictOff)
	}
	s.noteModel(route, name, label)
	return nil
}

// maxModelName bounds the model name a request may give (the clients'
// names are a few dozen bytes; a longer one is a mistake, not a model).
const maxModelName = 256

// maxNamesLogged bounds the model names a server remembers having logged.
const maxNamesLogged = 64

// noteModel logs, once per name (up to maxNamesLogged names), that a
// request named a model the server does not have and was answered by the
// one it has.
func (s *Server) noteModel(route, asked, served string) {
	s.namesMu.Lock()
	defer s.namesMu.Unlock()
	if s.namesLogged[asked] || len(s.namesLogged) >= maxNamesLogged {
		return
	}
	if s.namesLogged == nil {
		s.namesLogged = map[string]bool{}
	}
	s.namesLogged[asked] = true
	s.opts.Logf("serve: %s asked for model %s; answering with %s, the one served (to refuse other names: %s)", route, clip.Quote(asked), served, s.optionText(hint.Action{Kind: hint.SetOption, Option: "server.Options.StrictModel", Value: "true"}))
}

// strictOff is the action that lets a strict server answer every model name.
var strictOff = hint.Action{Kind: hint.SetOption, Option: "server.Options.StrictModel", Value: "unset"}

// optionText says action a for the people who run the server (hintText).
func (s *Server) optionText(a hint.Action) string { return hintText(s.opts.HintText, a) }

// embedTexts embeds texts (the request's field, for errors) with the
// served model, as queries or as documents, batched with other requests'
// texts; it returns the vectors and the model tokens they took: the path
// of every embedding dialect. The first error of checks (the request's own:
// its texts read, its model and dimensions), then the limits, are checked
// first.
func (s *Server) embedTexts(ctx context.Context, field string, texts []string, query bool, checks ...error) ([][]float32, int, error) {
	for _, err := range checks {
		if err != nil {
			return nil, 0, err
		}
	}
	if len(texts) == 0 {
		return nil, 0, badRequest("%s: no texts given", field)
	}
	if len(texts) > s.lim.MaxInputs {
		return nil, 0, overLimit("%s: %d texts, over the limit of %d", field, len(texts), s.lim.MaxInputs)
	}
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			return nil, 0, badRequest("%s[%d]: empty text", field, i)
		}
	}
	b, err := s.embedderFor(ctx)
	if err != nil {
		return nil, 0, err
	}
	tokens, err := s.countInputs(ctx, field, texts)
	if err != nil {
		return nil, 0, err
	}
	j := embedJob{ctx: ctx, texts: texts, query: query, tokens: tokens, ans: newAnswer[[][]float32]()}
	vecs, err := roundTrip(ctx, b, j, j.ans)
	if err != nil {
		return nil, 0, err
	}
	s.metrics.embedded.Add(float64(len(texts)))
	return vecs, tokens, nil
}

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	var req EmbeddingsRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	var format error
	switch req.EncodingFormat {
	case "", "float", "base64":
	default:
		format = badRequest("encoding_format %q: want float or base64", req.EncodingFormat)
	}
	texts, err := readInput(req.Input)
	vecs, tokens, err := s.embedTexts(r.Context(), "input", texts, false,
		err, format, s.checkModel("/v1/embeddings", req.Model), s.checkDimensions("dimensions", req.Dimensions))
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
	writeJSON(w, http.StatusOK, out)
}

// checkDimensions refuses a dimension other than the model's (field names
// the request's field; nil: not asked).
func (s *Server) checkDimensions(field string, dims *int) error {
	m := s.eng.Model()
	if dims == nil || *dims == m.Dim {
		return nil
	}
	return badRequest("%s %d: %s gives %d-dimensional vectors and cannot shorten them", field, *dims, m.Label(), m.Dim)
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	data := []openAIModel{{ID: s.modelName(), Object: "model", OwnedBy: "anna"}}
	if s.opts.Reranker != nil && s.opts.RerankerName != "" {
		data = append(data, openAIModel{ID: s.opts.RerankerName, Object: "model", OwnedBy: "anna"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// RerankRequest is Cohere's v1 and Jina's POST /v1/rerank body.
type RerankRequest struct {
	Query     string            `json:"query"`
	Documents []json.RawMessage `json:"documents"` // strings, or objects with "text"
	TopN      *int              `json:"top_n,omitempty"`
	Model     string            `json:"model,omitempty"`
	// ReturnDocuments: nil returns them (Jina's default; Cohere's clients
	// ignore them).
	ReturnDocuments *bool `json:"return_documents,omitempty"`
}

// RerankResult is one document's score, by its index in the request.
type RerankResult struct {
	Index          int             `json:"index"`
	RelevanceScore float64         `json:"relevance_score"`
	Document       *RerankDocument `json:"document,omitempty"`
}

// RerankDocument is a result's document in Cohere's and Jina's shape.
type RerankDocument struct {
	Text string `json:"text"`
}

// RerankResponse is the answer, best first: Cohere's fields (id, meta)
// and Jina's (model, usage) together.
type RerankResponse struct {
	ID      string         `json:"id,omitempty"`
	Results []RerankResult `json:"results"`
	Model   string         `json:"model,omitempty"`
	Usage   *RerankUsage   `json:"usage,omitempty"`
	Meta    *CohereMeta    `json:"meta,omitempty"`
}

// RerankUsage is Jina's count of the tokens read.
type RerankUsage struct {
	TotalTokens int `json:"total_tokens"`
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

// pairTokens counts a pair's model tokens: rerank.Model.PairTokens.
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

// rerankTexts scores docs against query with the served reranker, batched
// with other requests' pairs (field names the documents' field, for
// errors); it returns the logits and the pairs' model tokens (0 when the
// reranker does not count them). The limits are checked first.
func (s *Server) rerankTexts(ctx context.Context, field, query string, docs []string) ([]float32, int, error) {
	if s.opts.Reranker == nil {
		return nil, 0, noReranker("this server has no reranker")
	}
	if strings.TrimSpace(query) == "" {
		return nil, 0, badRequest("query: %v", engine.ErrEmptyQuery)
	}
	if len(query) > s.lim.MaxQueryBytes {
		return nil, 0, overLimit("query: %d bytes, over the limit of %d", len(query), s.lim.MaxQueryBytes)
	}
	if len(docs) == 0 {
		return nil, 0, badRequest(`field %q: missing or empty (want an array of strings)`, field)
	}
	if len(docs) > s.lim.MaxInputs {
		return nil, 0, overLimit("%s: %d, over the limit of %d", field, len(docs), s.lim.MaxInputs)
	}
	j := rerankJob{ctx: ctx, pairs: make([]rerank.Pair, len(docs)), ans: newAnswer[[]float32]()}
	pt, _ := s.opts.Reranker.(pairTokens)
	for i, d := range docs {
		j.pairs[i] = rerank.Pair{Query: query, Doc: d}
	}
	var err error
	if j.tokens, err = s.countPairs(ctx, field, pt, j.pairs); err != nil {
		return nil, 0, err
	}
	scores, err := roundTrip(ctx, s.rerankB, j, j.ans)
	return scores, j.tokens, err
}

// rankOrder is the indexes of scores, best first (ties in input order),
// at most topN of them (topN <= 0: all).
func rankOrder(scores []float32, topN int) []int {
	order := make([]int, len(scores))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return scores[order[a]] > scores[order[b]] })
	if topN > 0 && topN < len(order) {
		order = order[:topN]
	}
	return order
}

// sigmoid maps a cross-encoder's logit into [0, 1], keeping its order:
// the relevance_score of Cohere's API, TEI's score without raw_scores.
func sigmoid(x float32) float64 { return 1 / (1 + math.Exp(-float64(x))) }

// readTopN checks top_n (nil: all n).
func readTopN(topN *int, n int) (int, error) {
	if topN == nil {
		return n, nil
	}
	if *topN < 1 {
		return 0, badRequest("top_n: %d, want at least 1", *topN)
	}
	return min(*topN, n), nil
}

func (s *Server) rerank(w http.ResponseWriter, r *http.Request) {
	var req RerankRequest
	if err := decodeLenient(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.opts.Reranker != nil {
		if err := s.checkReranker("/v1/rerank", req.Model); err != nil {
			s.fail(w, r, err)
			return
		}
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
	topN, err := readTopN(req.TopN, len(docs))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	scores, tokens, err := s.rerankTexts(r.Context(), "documents", req.Query, docs)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Jina's API returns the documents unless told not to; Cohere's only
	// when asked, and its clients ignore them otherwise.
	withDocs := req.ReturnDocuments == nil || *req.ReturnDocuments
	out := RerankResponse{ID: newID(), Results: make([]RerankResult, 0, topN), Model: s.opts.RerankerName, Meta: cohereMeta("1", 0, 1)}
	if tokens > 0 {
		out.Usage = &RerankUsage{TotalTokens: tokens}
	}
	for _, i := range rankOrder(scores, topN) {
		res := RerankResult{Index: i, RelevanceScore: sigmoid(scores[i])}
		if withDocs {
			res.Document = &RerankDocument{Text: docs[i]}
		}
		out.Results = append(out.Results, res)
	}
	writeJSON(w, http.StatusOK, out)
}
