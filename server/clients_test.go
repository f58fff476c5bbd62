package server

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/pyref"
)

// modelServer is a Server over a fresh directory with the default model
// (the test skips without it), on a loopback httptest server: the engine,
// the server and its URL.
func modelServer(t *testing.T, eopts engine.Options, opts Options) (*engine.Engine, *Server, string) {
	t.Helper()
	if _, err := home.RequireDefaultModel(); err != nil {
		t.Skipf("default model not installed (run make setup): %v", err)
	}
	eopts.NoShare = true
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "idx"), eopts)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(eng, opts)
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
		eng.Close()
	})
	return eng, srv, hs.URL
}

// runPython runs script with python and args, env added to the
// environment, and returns its stdout; it fails the test with its stderr.
func runPython(t *testing.T, python, script string, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(python, append([]string{"-c", script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s: %v\n%s", filepath.Base(python), err, stderr)
	}
	return out
}

// clientsScript drives the server with each dialect's official client
// package, as a new user would: the base URL changed, the model names of
// the clients' own examples. Each section prints what the client returned
// (or the error it raised) under its name; one interpreter for all, since
// importing the clients is most of the cost.
const clientsScript = `
import json, os, sys, traceback
url, key = sys.argv[1], sys.argv[2]
texts = ["nearest neighbour graphs", "sourdough bread"]
docs = ["graphs", "bread with yeast", "wild yeast bread"]
out = {}
def section(name):
    def run(f):
        try:
            out[name] = f()
        except Exception as e:
            out[name] = {"exception": type(e).__name__ + ": " + str(e), "trace": traceback.format_exc()}
    return run

@section("openai")
def _():
    import openai
    c = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    r = c.embeddings.create(model="text-embedding-3-small", input=texts)
    got = {"vectors": [d.embedding for d in r.data], "model": r.model}
    got["retrieve"] = c.models.retrieve(r.model).id
    try:
        c.models.retrieve("no-such-model")
    except openai.NotFoundError as e:
        got["retrieve_missing"] = e.status_code
    try:
        c.embeddings.create(model="text-embedding-3-small", input=[[1, 2, 3]])
    except openai.BadRequestError as e:
        got["tokens"] = str(e)
    return got

@section("langchain_defaults")
def _():
    from langchain_openai import OpenAIEmbeddings
    e = OpenAIEmbeddings(base_url=url + "/v1", api_key=key, max_retries=0)
    return {"vectors": e.embed_documents(texts)}

@section("langchain")
def _():
    from langchain_openai import OpenAIEmbeddings
    e = OpenAIEmbeddings(base_url=url + "/v1", api_key=key, max_retries=0, check_embedding_ctx_length=False)
    return {"vectors": e.embed_documents(texts), "query": e.embed_query(texts[0])}

@section("cohere_v1")
def _():
    import cohere
    co = cohere.Client(api_key=key, base_url=url)
    r = co.embed(texts=texts, model="embed-english-v3.0", input_type="search_document")
    q = co.embed(texts=texts[:1], model="embed-english-v3.0", input_type="search_query")
    t = co.embed(texts=texts, model="embed-english-v3.0", input_type="search_document", embedding_types=["float"])
    rr = co.rerank(model="rerank-english-v3.0", query="wild yeast bread", documents=docs, top_n=2)
    return {"vectors": r.embeddings, "query": q.embeddings[0], "by_type": t.embeddings.float_,
            "rerank": [[x.index, x.relevance_score] for x in rr.results]}

@section("cohere_v2")
def _():
    import cohere
    co = cohere.ClientV2(api_key=key, base_url=url)
    r = co.embed(texts=texts, model="embed-v4.0", input_type="search_document", embedding_types=["float"])
    q = co.embed(texts=texts[:1], model="embed-v4.0", input_type="search_query", embedding_types=["float"])
    rr = co.rerank(model="rerank-v3.5", query="wild yeast bread", documents=docs, top_n=2)
    return {"vectors": r.embeddings.float_, "query": q.embeddings.float_[0],
            "rerank": [[x.index, x.relevance_score] for x in rr.results]}

@section("huggingface_hub")
def _():
    from huggingface_hub import InferenceClient
    root = InferenceClient(model=url, token=key).feature_extraction(texts[1])
    embed = InferenceClient(model=url + "/embed", token=key)
    return {"root": root.tolist(), "vectors": embed.feature_extraction(texts).tolist(),
            "query": embed.feature_extraction(texts[0], prompt_name="query").tolist()[0]}

@section("ollama")
def _():
    import ollama
    c = ollama.Client(host=url)  # the key from $OLLAMA_API_KEY
    r = c.embed(model="nomic-embed-text", input=texts)
    one = c.embeddings(model="nomic-embed-text", prompt=texts[1])
    return {"vectors": r.embeddings, "model": r.model, "one": list(one.embedding), "list": [m.model for m in c.list().models]}

print(json.dumps(out))
`

// TestClients: each dialect's official client package (versions pinned in
// tools/requirements-clients.txt) works against the server by changing its
// base URL, naming the models of its own examples; its vectors are the
// served model's (documents or queries, as the client asked) and its
// rerank results the reranker's. langchain-openai's defaults fail with the
// one-line fix named.
func TestClients(t *testing.T) {
	python := pyref.Clients(t, "openai", "langchain_openai", "cohere", "huggingface_hub", "ollama")
	ctx := context.Background()
	var logMu sync.Mutex
	var logged []string
	eng, _, url := modelServer(t, engine.Options{}, Options{APIKey: "the-key", Reranker: &fakeReranker{}, RerankerName: "fake-reranker", Logf: func(f string, a ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		logged = append(logged, f)
	}})
	enc, err := eng.Teacher().LoadEncoder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"nearest neighbour graphs", "sourdough bread"}
	docVecs, err := enc.EmbedDocuments(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	queryVec, err := enc.EmbedQueries(ctx, texts[:1], encoder.Prompt{})
	if err != nil {
		t.Fatal(err)
	}
	out := runPython(t, python, clientsScript, []string{"TIKTOKEN_CACHE_DIR=" + filepath.Join(home.Dir(), "venv-clients", "tiktoken-cache"), "OLLAMA_API_KEY=the-key"}, url, "the-key")
	var got map[string]map[string]json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	section := func(t *testing.T, name string) map[string]json.RawMessage {
		t.Helper()
		s := got[name]
		if ex, ok := s["exception"]; ok {
			var trace string
			json.Unmarshal(s["trace"], &trace)
			t.Fatalf("%s raised %s\n%s", name, ex, trace)
		}
		return s
	}
	field := func(t *testing.T, s map[string]json.RawMessage, key string, v any) {
		t.Helper()
		if err := json.Unmarshal(s[key], v); err != nil {
			t.Fatalf("%s: %s: %v", key, s[key], err)
		}
	}
	vectors := func(t *testing.T, label string, got [][]float64, want [][]float32) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d vectors, want %d", label, len(got), len(want))
		}
		for i := range got {
			closeTo(t, label, got[i], want[i])
		}
	}
	ranks := func(t *testing.T, s map[string]json.RawMessage) {
		t.Helper()
		var rr [][2]float64
		field(t, s, "rerank", &rr)
		// The fake reranker counts query words: "wild yeast bread" holds
		// all three, "bread with yeast" two.
		if len(rr) != 2 || rr[0][0] != 2 || rr[1][0] != 1 || !(rr[0][1] > rr[1][1]) || rr[0][1] >= 1 {
			t.Errorf("rerank results %v, want documents 2 then 1, scores falling in (0, 1)", rr)
		}
	}
	t.Run("openai", func(t *testing.T) {
		s := section(t, "openai")
		var v [][]float64
		var model, retrieve, tokens string
		var missing int
		field(t, s, "vectors", &v)
		field(t, s, "model", &model)
		field(t, s, "retrieve", &retrieve)
		field(t, s, "retrieve_missing", &missing)
		field(t, s, "tokens", &tokens)
		vectors(t, "openai", v, docVecs)
		if model != eng.Model().Name || retrieve != model || missing != 404 {
			t.Errorf("model %q, models.retrieve %q, of a missing one %d", model, retrieve, missing)
		}
		if !strings.Contains(tokens, "check_embedding_ctx_length=False") {
			t.Errorf("token arrays: %q names no fix", tokens)
		}
	})
	t.Run("langchain-openai", func(t *testing.T) {
		// Defaults: tiktoken's token IDs are sent, refused with the fix.
		ex := string(got["langchain_defaults"]["exception"])
		if !strings.Contains(ex, "check_embedding_ctx_length=False") {
			t.Errorf("langchain-openai's defaults: %s, want an error naming check_embedding_ctx_length=False", got["langchain_defaults"])
		}
		t.Logf("langchain-openai's defaults raise %s", ex)
		s := section(t, "langchain")
		var v [][]float64
		var q []float64
		field(t, s, "vectors", &v)
		field(t, s, "query", &q)
		vectors(t, "langchain embed_documents", v, docVecs)
		// langchain-openai embeds a query as a document (OpenAI's API has no other kind).
		closeTo(t, "langchain embed_query", q, docVecs[0])
	})
	for _, name := range []string{"cohere_v1", "cohere_v2"} {
		t.Run(name, func(t *testing.T) {
			s := section(t, name)
			var v [][]float64
			var q []float64
			field(t, s, "vectors", &v)
			field(t, s, "query", &q)
			vectors(t, name, v, docVecs)
			closeTo(t, name+" search_query", q, queryVec[0])
			if name == "cohere_v1" {
				var bt [][]float64
				field(t, s, "by_type", &bt)
				vectors(t, name+" embedding_types", bt, docVecs)
			}
			ranks(t, s)
		})
	}
	t.Run("huggingface_hub", func(t *testing.T) {
		s := section(t, "huggingface_hub")
		var root, v [][]float64
		var q []float64
		field(t, s, "root", &root)
		field(t, s, "vectors", &v)
		field(t, s, "query", &q)
		vectors(t, "feature_extraction at the root", root, docVecs[1:])
		vectors(t, "feature_extraction at /embed", v, docVecs)
		closeTo(t, "prompt_name query", q, queryVec[0])
	})
	t.Run("ollama", func(t *testing.T) {
		s := section(t, "ollama")
		var v [][]float64
		var one []float64
		var model string
		var list []string
		field(t, s, "vectors", &v)
		field(t, s, "one", &one)
		field(t, s, "model", &model)
		field(t, s, "list", &list)
		vectors(t, "ollama embed", v, docVecs)
		closeTo(t, "ollama embeddings", one, docVecs[1])
		if model != eng.Model().Name || !slices.Equal(list, []string{eng.Model().Name}) {
			t.Errorf("model %q, list %v", model, list)
		}
	})
	// Each model name the clients asked for was logged once.
	logMu.Lock()
	defer logMu.Unlock()
	if len(logged) == 0 {
		t.Errorf("no model name logged")
	}
	t.Logf("logged: %d model names answered by the served model", len(logged))
}

// closeTo checks a client's vector against the encoder's, to the float32
// rounding a JSON round trip and another batch allow.
func closeTo(t *testing.T, label string, got []float64, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d dimensions, want %d", label, len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-float64(want[i])) > 1e-5 {
			t.Fatalf("%s[%d] = %v, want %v", label, i, got[i], want[i])
		}
	}
}
