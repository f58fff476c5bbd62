// Package encoder turns texts into embedding vectors with a converted model
// (a BERT-family encoder or a decoder; see `annactl models import`) run in
// this process by ONNX Runtime or anna's pure-Go forward (Model), or by
// another server (RemoteEncoder), and caches them on disk keyed by the
// model's fingerprint.
//
// Input handling, shared by every Encoder here: texts are tokenised with the
// model's tokenizer.json and truncated to the model's max length (256 tokens
// for all-MiniLM-L6-v2). The empty string is allowed and embeds the special
// tokens alone ([CLS] [SEP]). Invalid UTF-8 is not an error: each bad byte
// sequence becomes U+FFFD, as Python's bytes.decode(errors="replace") does,
// so the vector equals that of the repaired text.
//
// Model's invariants: Load checks the model directory and loads the
// tokenizer but creates no ONNX Runtime session; the first embed call with
// a text to embed creates it, exactly once however many goroutines call at
// once, and returns its error if that fails (as every later call does). So
// Dim, Fingerprint and a Cache that answers every text from disk cost no
// session. A text's vector is its own: neither Workers nor the other
// texts of a call (which batch it lands in) change it — the same bits,
// in float32 and in int8 models alike, on either backend
// (TestVectorIsItsOwn): internal/inference batches only texts of one token
// length (nothing is padded) and an int8 graph quantizes every product's
// input per row (token). Int8 models converted before issue 64 quantized
// the attention's input with one scale per batch, which moved a vector
// with its batch; they still run as they were converted (an index keeps
// its vectors), and a new conversion has a new fingerprint.
// The encoder runs whatever graph model.onnx holds, float32, int8 or int4; the
// manifest's fingerprint tells their vectors apart.
//
// Backends (Options.Backend): ONNX Runtime ("onnxruntime", the default in
// builds with cgo and without the annapure tag) or pure Go ("go", in every
// build and the default where ONNX Runtime is not built in: model/bert's
// forward over the float32 weights read from model.onnx, model/llama's
// for decoders). The Go backend runs float32 BERT embedding models whose
// pooling is outside the graph (mean, cls, last; MiniLM, bge-small) and
// float32 Llama-family decoder embedders with any pooling or technique
// (last token, mean, the trained heads, AutoRegEmbed, Causal2Vec;
// SmolLM2), and int8 BERT graphs, and refuses others at Load, naming
// why; its float32 vectors equal ONNX Runtime's within 1e-5
// (TestGoBackendMatchesORT), its int8 ones within cosine 0.995
// (TestGoBackendInt8MatchesORT; 0.9998 on average), so both share the
// fingerprint and a cache. An int8 model with no backend named runs on
// the Go forward where the CPU has AMX-INT8 or AVX-512 VNNI (1.5× and
// 1.3× ONNX Runtime's speed there; TestDefaultBackendInt8). Loading, the session,
// the BERT run and the length-sorted batching are internal/inference's, shared
// with package rerank.
//
// Ensemble (Open on a directory whose manifest has architecture
// "ensemble": `annactl adapt --serve ensemble` writes one) embeds with
// several installed models at once, one joined vector whose cosine is the
// weighted mean of theirs; each part is a Model with the invariants above,
// so an ensemble's vector is its own too.
//
// RemoteEncoder (Open or OpenRemote with "URL#NAME") embeds with a model
// another server runs, through its OpenAI-compatible /v1/embeddings; its
// invariants are on its type.
//
// A nil context.Context given to a function of this package is
// context.Background().
package encoder

import (
	"context"
	"strings"
)

// Encoder embeds documents and queries into vectors of Dim() floats. The
// vectors are L2-normalised when the model's manifest says so (MiniLM:
// yes), so cosine similarity is a dot product. Fingerprint names the exact
// vectors: equal fingerprints give equal vectors for equal inputs.
type Encoder interface {
	EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error)
	EmbedQueries(ctx context.Context, queries []string, p Prompt) ([][]float32, error)
	Dim() int
	Fingerprint() string
}

// Prompt instructs an embedding model how to read queries. The zero Prompt
// embeds queries as they are (after the model's query prefix, if any).
//
// With an Instruction, each query is formatted with the model's instruction
// template, by default
//
//	Instruct: {task}
//	Query: {query}
//
// and few-shot Examples go first, each as the template applied to the
// example's query followed by "\nResponse: " and its response, separated
// by blank lines:
//
//	Instruct: {task}\nQuery: {ex1.Query}\nResponse: {ex1.Response}\n\n
//	Instruct: {task}\nQuery: {ex2.Query}\nResponse: {ex2.Response}\n\n
//	Instruct: {task}\nQuery: {query}
//
// The template replaces the model's query prefix. Documents never get an
// instruction, only the model's document prefix if it defines one.
type Prompt struct {
	Instruction string
	Examples    []Example
}

// Example is one few-shot demonstration: a query and a relevant response.
type Example struct {
	Query, Response string
}

// IsZero reports whether p asks for no formatting.
func (p Prompt) IsZero() bool { return p.Instruction == "" && len(p.Examples) == 0 }

// FormatQuery applies p to q with template (containing {task} and {query})
// and prefix (the model's query prefix, used when p is zero).
func FormatQuery(template, prefix string, p Prompt, q string) string {
	if p.IsZero() {
		return prefix + q
	}
	one := func(query string) string {
		r := strings.NewReplacer("{task}", p.Instruction, "{query}", query)
		return r.Replace(template)
	}
	var b strings.Builder
	for _, ex := range p.Examples {
		b.WriteString(one(ex.Query))
		b.WriteString("\nResponse: ")
		b.WriteString(ex.Response)
		b.WriteString("\n\n")
	}
	b.WriteString(one(q))
	return b.String()
}
