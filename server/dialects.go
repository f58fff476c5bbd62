package server

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
)

// The dialects of other embedding and rerank APIs, each the shape its
// official client sends and reads (tested with that client:
// clients_test.go): OpenAI's (openai.go), Cohere's v1 and v2, Jina's rerank
// (/v1/rerank, openai.go), Hugging Face text-embeddings-inference's and
// Ollama's. Each answers with the one model (and reranker) the server has;
// a request naming another model is answered by it and the name logged,
// unless Options.StrictModel. Unknown request fields are ignored (the
// clients add some from one version to the next).

// model answers GET /v1/models/{id}: OpenAI's model object of the
// embedding model or the reranker, by any name they answer to.
func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	switch {
	case s.isServedModel(id) && id != "":
		writeJSON(w, http.StatusOK, openAIModel{ID: s.modelName(), Object: "model", OwnedBy: "anna"})
	case s.opts.Reranker != nil && id == s.opts.RerankerName:
		writeJSON(w, http.StatusOK, openAIModel{ID: id, Object: "model", OwnedBy: "anna"})
	default:
		served := []string{s.modelName()}
		if s.opts.Reranker != nil && s.opts.RerankerName != "" {
			served = append(served, s.opts.RerankerName)
		}
		s.fail(w, r, errorf(http.StatusNotFound, "model_not_found", "model %q: not served here (GET /v1/models lists %s)", id, strings.Join(served, ", ")))
	}
}

// openAIModel is one entry of GET /v1/models.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// --- Cohere ---

// CohereEmbedRequest is the body of Cohere's POST /v1/embed and /v2/embed.
type CohereEmbedRequest struct {
	Texts          []string        `json:"texts"`
	Inputs         []cohereInput   `json:"inputs,omitempty"` // v2: content parts, text only here
	Images         json.RawMessage `json:"images,omitempty"`
	Model          string          `json:"model,omitempty"`
	InputType      string          `json:"input_type,omitempty"` // search_query embeds as queries; the others as documents
	EmbeddingTypes []string        `json:"embedding_types,omitempty"`
	Truncate       string          `json:"truncate,omitempty"` // anna truncates at the end, whatever is asked
	OutputDim      *int            `json:"output_dimension,omitempty"`
}

type cohereInput struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// CohereMeta is the meta object of Cohere's answers.
type CohereMeta struct {
	APIVersion  struct{ Version string } `json:"api_version"`
	BilledUnits struct {
		InputTokens int `json:"input_tokens,omitempty"`
		SearchUnits int `json:"search_units,omitempty"`
	} `json:"billed_units"`
}

func cohereMeta(version string, tokens, searchUnits int) *CohereMeta {
	m := &CohereMeta{}
	m.APIVersion.Version = version
	m.BilledUnits.InputTokens, m.BilledUnits.SearchUnits = tokens, searchUnits
	return m
}

// MarshalJSON writes api_version as Cohere does ({"version": "2"}).
func (m CohereMeta) MarshalJSON() ([]byte, error) {
	type billed = struct {
		InputTokens int `json:"input_tokens,omitempty"`
		SearchUnits int `json:"search_units,omitempty"`
	}
	return json.Marshal(struct {
		APIVersion  map[string]string `json:"api_version"`
		BilledUnits billed            `json:"billed_units"`
	}{map[string]string{"version": m.APIVersion.Version}, billed(m.BilledUnits)})
}

// newID is a random UUID-shaped id, as Cohere's answers carry.
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// cohereTexts reads the texts of a Cohere embed request and whether they
// embed as queries.
func cohereTexts(req *CohereEmbedRequest) ([]string, bool, error) {
	if len(req.Images) > 0 && !bytes.Equal(bytes.TrimSpace(req.Images), []byte("null")) {
		return nil, false, badRequest(`field "images": anna embeds text only`)
	}
	texts := req.Texts
	if len(req.Inputs) > 0 {
		if len(texts) > 0 {
			return nil, false, badRequest(`fields "texts" and "inputs": give one of them`)
		}
		for i, in := range req.Inputs {
			var parts []string
			for k, c := range in.Content {
				if c.Type != "text" {
					return nil, false, badRequest(`field "inputs[%d].content[%d]": type %q; anna embeds text only`, i, k, c.Type)
				}
				parts = append(parts, c.Text)
			}
			texts = append(texts, strings.Join(parts, "\n"))
		}
	}
	if len(texts) == 0 {
		return nil, false, badRequest(`field "texts": missing or empty (want an array of strings)`)
	}
	switch req.InputType {
	case "search_query":
		return texts, true, nil
	case "", "search_document", "classification", "clustering":
		return texts, false, nil
	}
	return nil, false, badRequest("input_type %q: want search_query, search_document, classification or clustering", req.InputType)
}

// cohereFloatOnly checks embedding_types: anna returns float embeddings.
func cohereFloatOnly(types []string) error {
	for _, t := range types {
		if t != "float" {
			return badRequest(`embedding_types: %q; anna returns float embeddings only (ask for ["float"])`, t)
		}
	}
	return nil
}

// cohereEmbed reads and embeds a Cohere embed request.
func (s *Server) cohereEmbed(w http.ResponseWriter, r *http.Request, route string) (*CohereEmbedRequest, []string, [][]float32, int, bool) {
	var req CohereEmbedRequest
	if err := decodeLenient(r, &req); err != nil {
		s.fail(w, r, err)
		return nil, nil, nil, 0, false
	}
	texts, query, err := cohereTexts(&req)
	vecs, tokens, err := s.embedTexts(r.Context(), "texts", texts, query,
		err, cohereFloatOnly(req.EmbeddingTypes), s.checkModel(route, req.Model), s.checkDimensions("output_dimension", req.OutputDim))
	if err != nil {
		s.fail(w, r, err)
		return nil, nil, nil, 0, false
	}
	return &req, texts, vecs, tokens, true
}

// cohereEmbedV1 answers POST /v1/embed: "embeddings_floats" (a list of
// vectors), or with embedding_types "embeddings_by_type".
func (s *Server) cohereEmbedV1(w http.ResponseWriter, r *http.Request) {
	req, texts, vecs, tokens, ok := s.cohereEmbed(w, r, "/v1/embed")
	if !ok {
		return
	}
	out := map[string]any{"id": newID(), "texts": texts, "meta": cohereMeta("1", tokens, 0)}
	if len(req.EmbeddingTypes) == 0 {
		out["response_type"], out["embeddings"] = "embeddings_floats", vecs
	} else {
		out["response_type"], out["embeddings"] = "embeddings_by_type", map[string]any{"float": vecs}
	}
	writeJSON(w, http.StatusOK, out)
}

// cohereEmbedV2 answers POST /v2/embed: "embeddings_by_type".
func (s *Server) cohereEmbedV2(w http.ResponseWriter, r *http.Request) {
	_, texts, vecs, tokens, ok := s.cohereEmbed(w, r, "/v2/embed")
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": newID(), "response_type": "embeddings_by_type",
		"embeddings": map[string]any{"float": vecs}, "texts": texts, "meta": cohereMeta("2", tokens, 0)})
}

// cohereRerankV2Request is the body of Cohere's POST /v2/rerank.
type cohereRerankV2Request struct {
	Model     string   `json:"model,omitempty"`
	Query     string   `json:"query"`
	Documents []string `json:"documents"`
	TopN      *int     `json:"top_n,omitempty"`
}

// cohereRerankV2 answers POST /v2/rerank: results by index with
// relevance_score, best first.
func (s *Server) cohereRerankV2(w http.ResponseWriter, r *http.Request) {
	var req cohereRerankV2Request
	if err := decodeLenient(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.opts.Reranker != nil {
		if err := s.checkReranker("/v2/rerank", req.Model); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	topN, err := readTopN(req.TopN, len(req.Documents))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	scores, _, err := s.rerankTexts(r.Context(), "documents", req.Query, req.Documents)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := RerankResponse{ID: newID(), Results: make([]RerankResult, 0, topN), Meta: cohereMeta("2", 0, 1)}
	for _, i := range rankOrder(scores, topN) {
		out.Results = append(out.Results, RerankResult{Index: i, RelevanceScore: sigmoid(scores[i])})
	}
	writeJSON(w, http.StatusOK, out)
}

// --- Hugging Face text-embeddings-inference ---

// teiEmbedRequest is TEI's POST /embed body.
type teiEmbedRequest struct {
	Inputs     json.RawMessage `json:"inputs"` // a string or an array of strings
	Normalize  *bool           `json:"normalize,omitempty"`
	PromptName string          `json:"prompt_name,omitempty"` // "query": the model's query side
	Dimensions *int            `json:"dimensions,omitempty"`
	Truncate   *bool           `json:"truncate,omitempty"` // anna truncates, whatever is asked
}

// readTexts reads a string or an array of strings (field names it);
// token arrays are refused, with hint appended.
func readTexts(field string, raw json.RawMessage, hint string) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, badRequest(`field %q: missing (want a string or an array of strings)`, field)
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []json.RawMessage
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest(`field %q: want a string or an array of strings`, field)
	}
	if len(many) == 0 {
		return nil, badRequest(`field %q: an empty array`, field)
	}
	out := make([]string, len(many))
	for i, m := range many {
		if err := json.Unmarshal(m, &out[i]); err != nil {
			if isTokens(m) || isNumber(m) {
				return nil, badRequest(`field "%s[%d]": token IDs, which this server cannot read (it tokenizes the text with its own model): send the text%s`, field, i, hint)
			}
			return nil, badRequest(`field "%s[%d]": want a string`, field, i)
		}
	}
	return out, nil
}

// teiEmbed answers POST /embed: a list of vectors.
func (s *Server) teiEmbed(w http.ResponseWriter, r *http.Request) {
	var req teiEmbedRequest
	if err := decodeLenient(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	s.teiEmbedWith(w, r, &req)
}

func (s *Server) teiEmbedWith(w http.ResponseWriter, r *http.Request, req *teiEmbedRequest) {
	var prompt error
	query := req.PromptName == "query"
	switch req.PromptName {
	case "query", "", "document", "passage":
	default:
		prompt = badRequest("prompt_name %q: want query or document", req.PromptName)
	}
	texts, err := readTexts("inputs", req.Inputs, "")
	vecs, _, err := s.embedTexts(r.Context(), "inputs", texts, query, err, prompt, s.checkDimensions("dimensions", req.Dimensions))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, vecs)
}

// teiRerankRequest is TEI's POST /rerank body.
type teiRerankRequest struct {
	Query      string   `json:"query"`
	Texts      []string `json:"texts"`
	RawScores  bool     `json:"raw_scores,omitempty"`  // the logits, not their sigmoid
	ReturnText bool     `json:"return_text,omitempty"` // each result's text
}

type teiRank struct {
	Index int     `json:"index"`
	Score float64 `json:"score"`
	Text  string  `json:"text,omitempty"`
}

// teiRerank answers POST /rerank: [{index, score}], best first.
func (s *Server) teiRerank(w http.ResponseWriter, r *http.Request) {
	var req teiRerankRequest
	if err := decodeLenient(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	s.teiRerankWith(w, r, &req)
}

func (s *Server) teiRerankWith(w http.ResponseWriter, r *http.Request, req *teiRerankRequest) {
	scores, _, err := s.rerankTexts(r.Context(), "texts", req.Query, req.Texts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]teiRank, 0, len(scores))
	for _, i := range rankOrder(scores, 0) {
		rk := teiRank{Index: i, Score: sigmoid(scores[i])}
		if req.RawScores {
			rk.Score = float64(scores[i])
		}
		if req.ReturnText {
			rk.Text = req.Texts[i]
		}
		out = append(out, rk)
	}
	writeJSON(w, http.StatusOK, out)
}

// teiRoot answers POST /, TEI's route that dispatches by the body: texts
// with a query rerank, inputs embed. huggingface_hub's
// InferenceClient(model=URL).feature_extraction posts here.
func (s *Server) teiRoot(w http.ResponseWriter, r *http.Request) {
	var req struct {
		teiEmbedRequest
		Query      *string  `json:"query"`
		Texts      []string `json:"texts"`
		RawScores  bool     `json:"raw_scores,omitempty"`
		ReturnText bool     `json:"return_text,omitempty"`
	}
	if err := decodeLenient(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Query != nil {
		s.teiRerankWith(w, r, &teiRerankRequest{Query: *req.Query, Texts: req.Texts, RawScores: req.RawScores, ReturnText: req.ReturnText})
		return
	}
	s.teiEmbedWith(w, r, &req.teiEmbedRequest)
}

// teiInfo answers GET /info: what TEI says of the model it serves.
func (s *Server) teiInfo(w http.ResponseWriter, r *http.Request) {
	m := s.eng.Model()
	dir := m.Dir
	if dir == "" {
		dir = home.DefaultModel()
	}
	pooling, maxLen, dtype := "", 0, "float32"
	if man, err := model.LoadManifest(dir); err == nil && man.Fingerprint == m.Fingerprint {
		pooling, maxLen = man.Pooling, man.MaxLength
		if man.Quantization != "" {
			dtype = man.Quantization
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"model_id":                s.modelName(),
		"model_sha":               m.Fingerprint,
		"model_dtype":             dtype,
		"model_type":              map[string]any{"embedding": map[string]any{"pooling": pooling}},
		"max_concurrent_requests": 512,
		"max_input_length":        maxLen,
		"max_batch_tokens":        s.opts.BatchTokens,
		"max_batch_requests":      nil,
		"max_client_batch_size":   s.lim.MaxInputs,
		"auto_truncate":           true,
		"tokenization_workers":    1,
		"version":                 "anna",
		"dimension":               m.Dim,
		"reranker":                s.opts.RerankerName,
	})
}

// --- Ollama ---

// ollamaEmbedRequest is Ollama's POST /api/embed body.
type ollamaEmbedRequest struct {
	Model      string          `json:"model"`
	Input      json.RawMessage `json:"input"`
	Dimensions *int            `json:"dimensions,omitempty"`
}

// ollamaEmbed answers POST /api/embed: {model, embeddings}.
func (s *Server) ollamaEmbed(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req ollamaEmbedRequest
	if err := decodeLenient(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	texts, err := readTexts("input", req.Input, "")
	vecs, tokens, err := s.embedTexts(r.Context(), "input", texts, false, err, s.checkModel("/api/embed", req.Model), s.checkDimensions("dimensions", req.Dimensions))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"model": s.ollamaName(req.Model), "embeddings": vecs,
		"total_duration": time.Since(start).Nanoseconds(), "load_duration": 0, "prompt_eval_count": tokens})
}

// ollamaEmbeddings answers POST /api/embeddings, Ollama's older route:
// {model, prompt} → {embedding}.
func (s *Server) ollamaEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Prompt string `json:"prompt"`
	}
	if err := decodeLenient(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	vecs, _, err := s.embedTexts(r.Context(), "prompt", []string{req.Prompt}, false, s.checkModel("/api/embeddings", req.Model))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"embedding": vecs[0]})
}

// ollamaName is the model name an Ollama answer carries: the one asked
// for when it names the served model, else the served model's.
func (s *Server) ollamaName(asked string) string {
	if asked != "" && s.isServedModel(asked) {
		return asked
	}
	return s.modelName()
}

// ollamaTags answers GET /api/tags, Ollama's list of local models: the
// embedding model served.
func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request) {
	m := s.eng.Model()
	writeJSON(w, http.StatusOK, map[string]any{"models": []map[string]any{{
		"name": s.modelName(), "model": s.modelName(), "digest": m.Fingerprint, "size": 0,
		"details": map[string]any{"format": "onnx", "family": "anna", "families": []string{"anna"}, "parameter_size": "", "quantization_level": ""},
	}}})
}
