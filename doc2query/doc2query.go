// Package doc2query writes search queries for corpus documents with an
// instruct decoder (doc2query; InPars and Promptagator filter them with a
// retriever): synthetic (query, document) pairs for a collection that has
// few or no judged queries, which mine-negatives then labels with its
// teacher and filters (--require-positive-top).
//
// The decoder is a llama GGUF file (smollm2-135m-instruct from the
// catalogue, or any file with a ChatML chat template: SmolLM2, Qwen2,
// Qwen3), run by internal/model/llama (the trainer's decoder's forward) with a
// key/value cache. A model writes the languages its file names
// (general.languages; SmolLM2, by name, English): Run leaves out the
// documents in other languages (given, else detected by package lang) and
// refuses a corpus mostly in them (ErrLanguage), naming them. Its tokenizer
// is built from the file as the import path builds it,
// without the EOS an embedder appends. Each document, cut to MaxDocTokens,
// goes into one user turn after the instruction, in the file's chat format
// with its default system turn; generation stops at the end of the turn.
//
// Output is a BEIR folder that every anna tool reads: corpus.jsonl (the
// source corpus, linked or copied), queries.jsonl (one generated query a
// line: {"_id", "text", "doc"}, doc the document it was written for) and
// qrels/generated.tsv (each query → its document, grade 1; split
// "generated").
//
// Invariants and crash behaviour: the documents are taken in a seeded
// order and each is sampled with its own seed (Options.Seed and its ID), so
// a document's queries do not depend on the batch it ran in or on earlier
// runs. queries.jsonl is appended a batch at a time and synced; a run
// stopped at any point (Ctrl-C, kill -9) resumes with the documents that
// have no line yet, dropping a torn last line; qrels/generated.tsv is
// rewritten from queries.jsonl by rename after every batch, so it never
// names a query that queries.jsonl lacks. A document whose generations are
// all empty gets no line and is generated again (with the same result) on
// resume.
//
// A nil context.Context given to a function of this package is
// context.Background().
package doc2query

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/lang"

	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/model/gguf"
	"github.com/anna-search/anna/internal/model/llama"
	"github.com/anna-search/anna/internal/model/llama/llamaload"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/internal/tokenizer"
)

// Split is the qrels split the output's judgments are in.
const Split = "generated"

// DefaultInstruction asks for one query a document answers.
const DefaultInstruction = "Write one short search query that the following document answers. Reply with the query only."

// Options set what Run generates.
type Options struct {
	Instruction  string  // the request before the document (default DefaultInstruction)
	Docs         int     // documents to write queries for, in a seeded order (0: all)
	PerDoc       int     // queries per document (default 1)
	MaxNew       int     // tokens per query at most (default 40)
	MaxDocTokens int     // the document is cut to this many tokens (default 256)
	Temperature  float64 // 0 decodes greedily (then PerDoc must be 1)
	TopP         float64 // nucleus sampling's mass (0: all tokens)
	Seed         uint64
	Batch        int // documents decoded together (default 8)
	// Examples are few-shot demonstrations shown before each document, as
	// earlier turns of the chat (their documents cut to ExampleDocTokens,
	// default 96): they show the decoder what a query of the collection
	// looks like.
	Examples         []Example
	ExampleDocTokens int
	// Progress, when set, is called after each batch with the documents
	// done (this run and earlier ones) and the total.
	Progress func(done, total int)
}

func (o *Options) defaults() error {
	if o.Instruction == "" {
		o.Instruction = DefaultInstruction
	}
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{{"PerDoc", &o.PerDoc, 1}, {"MaxNew", &o.MaxNew, 40}, {"MaxDocTokens", &o.MaxDocTokens, 256}, {"Batch", &o.Batch, 8}, {"ExampleDocTokens", &o.ExampleDocTokens, 96}} {
		if *f.v < 0 {
			return fmt.Errorf("doc2query: %s %d < 0", f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if o.Docs < 0 || o.Temperature < 0 || o.TopP < 0 || o.TopP > 1 {
		return fmt.Errorf("doc2query: Docs %d, Temperature %g, TopP %g: want Docs ≥ 0, Temperature ≥ 0, 0 ≤ TopP ≤ 1", o.Docs, o.Temperature, o.TopP)
	}
	if o.Temperature == 0 && o.PerDoc > 1 {
		return fmt.Errorf("doc2query: %d queries per document need sampling (Temperature > 0): greedy decoding writes one", o.PerDoc)
	}
	return nil
}

// Example is one demonstration: a document and a query it answers.
type Example struct{ Doc, Query string }

// ExamplesFrom picks n judged (query, document) pairs of a BEIR folder's
// split, in a seeded order, one per query (its first relevant document).
func ExamplesFrom(dir, split string, n int, seed uint64) ([]Example, error) {
	ds, err := beir.Load(dir, split)
	if err != nil {
		return nil, fmt.Errorf("doc2query: examples: %w", err)
	}
	byID := map[string]beir.Doc{}
	for _, d := range ds.Corpus {
		byID[d.ID] = d
	}
	var qids []string
	for q := range ds.Qrels {
		if _, ok := ds.Queries[q]; ok {
			qids = append(qids, q)
		}
	}
	sort.Slice(qids, func(i, j int) bool { return seededBefore(seed, qids[i], qids[j]) })
	var out []Example
	for _, q := range qids {
		if len(out) == n {
			break
		}
		var docs []string
		for d, g := range ds.Qrels[q] {
			if _, ok := byID[d]; ok && g > 0 {
				docs = append(docs, d)
			}
		}
		if len(docs) == 0 {
			continue
		}
		sort.Strings(docs)
		out = append(out, Example{Doc: docText(byID[docs[0]]), Query: ds.Queries[q]})
	}
	if len(out) < n {
		return nil, fmt.Errorf("doc2query: examples: %s (split %s) has %d judged queries, %d asked", dir, split, len(out), n)
	}
	return out, nil
}

// docText is what the decoder reads of a document: its title, a new line,
// its text.
func docText(d beir.Doc) string {
	if d.Title != "" {
		return d.Title + "\n" + d.Text
	}
	return d.Text
}

// Generator is a decoder and its tokenizer, ready to write queries.
type Generator struct {
	m      *llama.Model
	tok    *tokenizer.Tokenizer
	system string // the chat template's default system turn ("" when it has none)
	stop   []int32
	path   string
	// langs are the languages the model writes (ISO 639-1), nil when
	// unknown: its GGUF's general.languages, else SmolLM2's English.
	langs []string
}

// Languages are the languages the generator's model writes, nil when its
// file does not say (and it is not a model anna knows).
func (g *Generator) Languages() []string { return g.langs }

// ErrLanguage is wrapped by Run's refusal of a corpus in languages the
// model cannot write.
var ErrLanguage = errors.New("doc2query: the model does not write the corpus's language")

// writes reports whether the model writes language code ("" is a text
// whose language could not be told: taken as writable).
func (g *Generator) writes(code string) bool {
	if g.langs == nil || code == "" {
		return true
	}
	for _, l := range g.langs {
		if l == code {
			return true
		}
	}
	return false
}

// modelLanguages reads general.languages, else knows SmolLM2 (trained on
// English) by its name.
func modelLanguages(kv map[string]any, path string) []string {
	switch v := kv["general.languages"].(type) {
	case []string:
		return v
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	name, _ := kv["general.name"].(string)
	if strings.Contains(strings.ToLower(name+" "+filepath.Base(path)), "smollm") {
		return []string{"en"}
	}
	return nil
}

// chatML finds a ChatML template's default system message.
var chatMLSystem = regexp.MustCompile(`<\|im_start\|>system\\n(.*?)<\|im_end\|>|<\|im_start\|>system\n(.*?)<\|im_end\|>`)

// Load reads a llama GGUF file's decoder, tokenizer and chat format.
func Load(path string) (*Generator, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("doc2query: %w", err)
	}
	defer f.Close()
	tmpl, _ := f.KV["tokenizer.chat_template"].(string)
	if !strings.Contains(tmpl, "<|im_start|>") {
		return nil, fmt.Errorf("doc2query: %s: tokenizer.chat_template is not ChatML (<|im_start|>role ... <|im_end|>); anna writes ChatML prompts (SmolLM2, Qwen2, Qwen3)", path)
	}
	g := &Generator{path: path, langs: modelLanguages(f.KV, path)}
	if m := chatMLSystem.FindStringSubmatch(tmpl); m != nil {
		g.system = m[1] + m[2]
	}
	js, err := f.TokenizerJSON(gguf.TokenizerOptions{})
	if err != nil {
		return nil, fmt.Errorf("doc2query: %w", err)
	}
	tf, err := os.CreateTemp("", "anna-doc2query-tokenizer-*.json")
	if err != nil {
		return nil, fmt.Errorf("doc2query: %w", err)
	}
	defer os.Remove(tf.Name())
	if _, err := tf.Write(js); err != nil {
		tf.Close()
		return nil, fmt.Errorf("doc2query: %w", err)
	}
	if err := tf.Close(); err != nil {
		return nil, fmt.Errorf("doc2query: %w", err)
	}
	if g.tok, err = tokenizer.Load(tf.Name()); err != nil {
		return nil, fmt.Errorf("doc2query: %w", err)
	}
	end := g.tok.IDs("<|im_end|>")
	if len(end) != 1 {
		g.tok.Close()
		return nil, fmt.Errorf("doc2query: %s: <|im_end|> is not one token of its vocabulary", path)
	}
	g.stop = []int32{int32(end[0])}
	if eos, err := f.Int("tokenizer.ggml.eos_token_id"); err == nil && int32(eos) != g.stop[0] {
		g.stop = append(g.stop, int32(eos))
	}
	if g.m, err = llamaload.Load(path, llamaload.LoadOptions{KeepBase: true}); err != nil { // generation trains nothing
		g.tok.Close()
		return nil, fmt.Errorf("doc2query: %w", err)
	}
	return g, nil
}

// Close frees the tokenizer.
func (g *Generator) Close() error { return g.tok.Close() }

// prompt is a document's token ids in the chat format: the system turn,
// each example as a user turn and the assistant's answer (the prefix every
// document shares, fed once), then the user turn (instruction, blank line,
// the document cut to o.MaxDocTokens) and the opening of the assistant's
// turn. Each part is tokenized whole, as a chat template's output is
// (pieces tokenized apart would split differently where they meet: "\n\n"
// is one token, "\n" twice two); the parts meet at a special token, where
// the tokenizer splits anyway (TestPrompt).
func (g *Generator) prompt(doc string, o Options) []int32 {
	return append(g.prefix(o), g.turn(doc, o)...)
}

func (g *Generator) prefix(o Options) []int32 {
	var b strings.Builder
	if g.system != "" {
		b.WriteString("<|im_start|>system\n" + g.system + "<|im_end|>\n")
	}
	for _, ex := range o.Examples {
		b.WriteString("<|im_start|>user\n" + o.Instruction + "\n\n" + g.cut(ex.Doc, o.ExampleDocTokens) + "<|im_end|>\n")
		b.WriteString("<|im_start|>assistant\n" + ex.Query + "<|im_end|>\n")
	}
	return g.ids(b.String())
}

func (g *Generator) turn(doc string, o Options) []int32 {
	return g.ids("<|im_start|>user\n" + o.Instruction + "\n\n" + g.cut(doc, o.MaxDocTokens) + "<|im_end|>\n<|im_start|>assistant\n")
}

func (g *Generator) ids(text string) []int32 {
	ids := g.tok.IDs(text)
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// cut is text's first n tokens, as text (text itself when it is shorter).
func (g *Generator) cut(text string, n int) string {
	ids := g.tok.IDs(text)
	if len(ids) <= n {
		return text
	}
	return g.tok.Decode(ids[:n], false)
}

// clean turns a generation into a query: its first sentence of its first
// non-empty line, without surrounding quotes or a "Query:" label (a small
// model goes on past the query into a summary).
func clean(s string) string {
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		for _, p := range []string{"Query:", "query:", "Search query:", "Search Query:"} {
			line = strings.TrimSpace(strings.TrimPrefix(line, p))
		}
		for _, end := range []string{". ", "? ", "! "} {
			if i := strings.Index(line, end); i > 0 {
				line = line[:i+1]
			}
		}
		line = strings.Trim(line, "\"'“”` ")
		if line != "" {
			return line
		}
	}
	return ""
}

// Queries writes up to o.PerDoc distinct queries for each document (fewer
// when generations are empty or repeat), sampling document i with seeds[i]
// (its j-th query with seeds[i]+j).
func (g *Generator) Queries(ctx context.Context, docs []beir.Doc, seeds []uint64, o Options) ([][]string, error) {
	ctx = safe.Ctx(ctx)
	if err := o.defaults(); err != nil {
		return nil, err
	}
	var prompts [][]int32
	var ps []uint64
	for i, d := range docs {
		p := g.turn(docText(d), o)
		for j := 0; j < o.PerDoc; j++ {
			prompts = append(prompts, p)
			ps = append(ps, seeds[i]+uint64(j))
		}
	}
	gen, err := g.m.Generate(ctx, prompts, llama.GenerateOptions{Prefix: g.prefix(o), MaxNew: o.MaxNew, Stop: g.stop, Temperature: o.Temperature, TopP: o.TopP, Seeds: ps})
	if err != nil {
		return nil, fmt.Errorf("doc2query: %w", err)
	}
	out := make([][]string, len(docs))
	for k, ids := range gen {
		i := k / o.PerDoc
		ids64 := make([]int64, len(ids))
		for j, id := range ids {
			ids64[j] = int64(id)
		}
		q := clean(g.tok.Decode(ids64, true))
		if q != "" && !contains(out[i], q) {
			out[i] = append(out[i], q)
		}
	}
	return out, nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// line is one line of queries.jsonl.
type line struct {
	ID   string `json:"_id"`
	Text string `json:"text"`
	Doc  string `json:"doc"`
}

// Run writes queries for the corpus of the BEIR folder src into the BEIR
// folder out (see the package comment), resuming what out holds.
func Run(ctx context.Context, g *Generator, src, out string, o Options) error {
	ctx = safe.Ctx(ctx)
	if err := o.defaults(); err != nil {
		return err
	}
	docs, err := readCorpus(src)
	if err != nil {
		return err
	}
	order := seededOrder(docs, o.Seed)
	if o.Docs > 0 && o.Docs < len(order) {
		order = order[:o.Docs]
	}
	if order, err = g.writable(order); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(out, "qrels"), 0o755); err != nil {
		return fmt.Errorf("doc2query: %w", err)
	}
	if err := linkCorpus(beir.CorpusPath(src), beir.CorpusPath(out)); err != nil {
		return err
	}
	qpath := beir.QueriesPath(out)
	lines, err := resume(qpath)
	if err != nil {
		return err
	}
	done := map[string]bool{}
	for _, l := range lines {
		done[l.Doc] = true
	}
	f, err := os.OpenFile(qpath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("doc2query: %w", err)
	}
	defer f.Close()
	var todo []beir.Doc
	for _, d := range order {
		if !done[d.ID] {
			todo = append(todo, d)
		}
	}
	total, finished := len(order), len(order)-len(todo)
	if o.Progress != nil {
		o.Progress(finished, total)
	}
	for i := 0; i < len(todo); i += o.Batch {
		batch := todo[i:min(i+o.Batch, len(todo))]
		seeds := make([]uint64, len(batch))
		for j, d := range batch {
			seeds[j] = docSeed(o.Seed, d.ID)
		}
		qs, err := g.Queries(ctx, batch, seeds, o)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		for j, d := range batch {
			for k, q := range qs[j] {
				l := line{ID: fmt.Sprintf("gq%d-%s", k, d.ID), Text: q, Doc: d.ID}
				if err := enc.Encode(l); err != nil {
					return fmt.Errorf("doc2query: %w", err)
				}
				lines = append(lines, l)
			}
		}
		if _, err := f.Write(buf.Bytes()); err != nil {
			return fmt.Errorf("doc2query: %s: %w", qpath, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("doc2query: %s: %w", qpath, err)
		}
		if err := writeQrels(lines, beir.QrelsPath(out, Split)); err != nil {
			return err
		}
		finished += len(batch)
		if o.Progress != nil {
			o.Progress(finished, total)
		}
	}
	return writeQrels(lines, beir.QrelsPath(out, Split))
}

// writable is docs less those in a language the model does not write (their
// own language, else the one detected where the detector is sure): queries in another language than the
// document's would teach the student nothing true. When those are most of
// docs, it refuses the corpus, naming the languages.
func (g *Generator) writable(docs []beir.Doc) ([]beir.Doc, error) {
	if g.langs == nil {
		return docs, nil
	}
	var keep []beir.Doc
	other := map[string]int{}
	for _, d := range docs {
		code := d.Language
		sure := true
		if c, err := lang.Parse(code); err == nil && c != "" && c != lang.Auto {
			code = c
		} else {
			guess := lang.GuessText(docText(d))
			code, sure = guess.Code, guess.Sure
		}
		// A guess the detector is not sure of (short or technical Latin
		// text is often read as Italian) leaves the document in.
		if !sure || g.writes(code) {
			keep = append(keep, d)
		} else {
			other[code]++
		}
	}
	if n := len(docs) - len(keep); n > 0 && 2*n > len(docs) {
		var ls []string
		for l, c := range other {
			ls = append(ls, fmt.Sprintf("%s (%d)", l, c))
		}
		sort.Strings(ls)
		return nil, hint.Errorf(hint.Action{Kind: hint.SetOption, Option: "adapt.Config.Generate", Value: "0"}, "%w: %s writes %s; %d of the %d documents are in %s, for which it would write queries in another language or nonsense: use extractive queries instead",
			ErrLanguage, filepath.Base(g.path), strings.Join(g.langs, ", "), n, len(docs), strings.Join(ls, ", "))
	}
	return keep, nil
}

func readCorpus(dir string) ([]beir.Doc, error) {
	path := beir.CorpusPath(dir)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("doc2query: %w", err)
	}
	defer f.Close()
	var docs []beir.Doc
	err = beir.ReadCorpus(f, path, func(_ int, d beir.Doc) error {
		if strings.TrimSpace(d.Title+d.Text) != "" {
			docs = append(docs, d)
		}
		return nil
	})
	return docs, err
}

// docSeed is a document's own sampling seed.
func docSeed(seed uint64, id string) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s", seed, id)
	return h.Sum64()
}

// seededOrder orders the documents by their seeded hash (ties by ID): a
// sample of the first N that the seed, not the file order, decides.
func seededOrder(docs []beir.Doc, seed uint64) []beir.Doc {
	out := append([]beir.Doc(nil), docs...)
	sort.SliceStable(out, func(i, j int) bool { return seededBefore(seed, out[i].ID, out[j].ID) })
	return out
}

// seededBefore orders IDs by their seeded hash, ties by ID.
func seededBefore(seed uint64, a, b string) bool {
	ha, hb := docSeed(seed, a), docSeed(seed, b)
	if ha != hb {
		return ha < hb
	}
	return a < b
}

// linkCorpus makes dst the source corpus: a hard link where the file
// system allows one, else a copy (made under a temporary name).
func linkCorpus(src, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	if err := atomicfile.Copy(dst, src); err != nil {
		return fmt.Errorf("doc2query: copying %s: %w", src, err)
	}
	return nil
}

// resume reads queries.jsonl, truncating a torn last line, and returns
// its lines.
func resume(path string) ([]line, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("doc2query: %w", err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		if err := os.Truncate(path, int64(i+1)); err != nil {
			return nil, fmt.Errorf("doc2query: dropping the torn last line of %s: %w", path, err)
		}
		data = data[:i+1]
	}
	var lines []line
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<24)
	for n := 1; sc.Scan(); n++ {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.ID == "" || l.Doc == "" {
			return nil, fmt.Errorf("doc2query: %s:%d: not a line this tool wrote (want {\"_id\", \"text\", \"doc\"})", path, n)
		}
		lines = append(lines, l)
	}
	return lines, sc.Err()
}

// writeQrels writes each line's query → its document, grade 1, by rename.
func writeQrels(lines []line, qrels string) error {
	var b bytes.Buffer
	b.WriteString("query-id\tcorpus-id\tscore\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "%s\t%s\t1\n", l.ID, l.Doc)
	}
	if err := atomicfile.WriteBytes(qrels, b.Bytes()); err != nil {
		return fmt.Errorf("doc2query: %w", err)
	}
	return nil
}
