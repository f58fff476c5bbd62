package server

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/pyref"
)

// openAIScript drives the server with the official openai package: the
// default call (which asks for base64), floats, a string input, usage,
// and the errors it raises for a wrong model, a wrong key and dimensions.
const openAIScript = `
import json, sys, openai
url, model = sys.argv[1], sys.argv[2]
c = openai.OpenAI(base_url=url + "/v1", api_key="the-key")
out = {}
r = c.embeddings.create(model=model, input=["nearest neighbour graphs", "sourdough bread"])
out["default"] = [d.embedding for d in r.data]
out["index"] = [d.index for d in r.data]
out["usage"] = [r.usage.prompt_tokens, r.usage.total_tokens]
out["model"] = r.model
r = c.embeddings.create(model=model, input="sourdough bread", encoding_format="float")
out["float"] = r.data[0].embedding
out["models"] = [m.id for m in c.models.list()]
def err(f):
    try:
        f()
    except openai.APIStatusError as e:
        return [e.status_code, e.body.get("code") if isinstance(e.body, dict) else str(e.body)]
    return None
out["wrong_model"] = err(lambda: c.embeddings.create(model="text-embedding-3-small", input="x"))
out["dimensions"] = err(lambda: c.embeddings.create(model=model, input="x", dimensions=64))
bad = openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0)
out["wrong_key"] = err(lambda: bad.embeddings.create(model=model, input="x"))
print(json.dumps(out))
`

// TestOpenAIClient: the official openai Python package works against the
// server by changing its base URL, and its vectors are the encoder's; a
// server with StrictModel refuses another model name (TestClients: the
// other clients, and the default that answers any name).
func TestOpenAIClient(t *testing.T) {
	python := pyref.Python(t, "openai")
	ctx := context.Background()
	eng, _, url := modelServer(t, engine.Options{}, Options{APIKey: "the-key", StrictModel: true})
	enc, err := eng.Teacher().LoadEncoder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	name := eng.Model().Name
	out := runPython(t, python, openAIScript, nil, url, name)
	var got struct {
		Default    [][]float64 `json:"default"`
		Index      []int       `json:"index"`
		Usage      []int       `json:"usage"`
		Model      string      `json:"model"`
		Float      []float64   `json:"float"`
		Models     []string    `json:"models"`
		WrongModel []any       `json:"wrong_model"`
		Dimensions []any       `json:"dimensions"`
		WrongKey   []any       `json:"wrong_key"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	want, err := enc.EmbedDocuments(ctx, []string{"nearest neighbour graphs", "sourdough bread"})
	if err != nil {
		t.Fatal(err)
	}
	close := func(label string, a []float64, b []float32) {
		if len(a) != len(b) {
			t.Fatalf("%s: %d dimensions, want %d", label, len(a), len(b))
		}
		for i := range a {
			if math.Abs(a[i]-float64(b[i])) > 1e-6 {
				t.Fatalf("%s[%d] = %v, want %v", label, i, a[i], b[i])
			}
		}
	}
	if len(got.Default) != 2 || got.Index[0] != 0 || got.Index[1] != 1 {
		t.Fatalf("data: %d vectors, indexes %v", len(got.Default), got.Index)
	}
	close("default (base64) 0", got.Default[0], want[0])
	close("default (base64) 1", got.Default[1], want[1])
	close("float", got.Float, want[1])
	// [CLS] nearest neighbour graphs [SEP] + [CLS] sourdough bread [SEP]
	if got.Usage[0] < 8 || got.Usage[0] != got.Usage[1] || got.Model != name {
		t.Errorf("usage %v, model %q", got.Usage, got.Model)
	}
	if len(got.Models) == 0 || got.Models[0] != name {
		t.Errorf("models.list: %v", got.Models)
	}
	for label, e := range map[string][]any{"wrong model": got.WrongModel, "dimensions": got.Dimensions, "wrong key": got.WrongKey} {
		if len(e) != 2 {
			t.Errorf("%s: no error raised", label)
		}
	}
	if got.WrongModel[0] != 404.0 || got.Dimensions[0] != 400.0 || got.WrongKey[0] != 401.0 {
		t.Errorf("errors: wrong model %v, dimensions %v, wrong key %v", got.WrongModel, got.Dimensions, got.WrongKey)
	}
	t.Logf("openai client: %d-dimensional vectors, usage %v, errors %v %v %v", len(got.Float), got.Usage, got.WrongModel, got.Dimensions, got.WrongKey)
}
