package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
	"github.com/spf13/cobra"
)

// embedMagic starts the binary output format.
const embedMagic = "ANNAEMB1"

type embedFlags struct {
	input, output, model, instruction, format string
	asQuery, cache                            bool
	batch, threads                            int
}

func (a *app) embedCommand() *cobra.Command {
	var fl embedFlags
	cmd := &cobra.Command{
		Use:   "embed [--input] FILE [flags]",
		Short: "embed JSON lines into vectors (JSON lines or binary)",
		Long: `Reads JSON lines {"id" or "_id": <any JSON value>, "title", "text"} (a BEIR
corpus.jsonl works as is) from FILE, or stdin, and writes one
{"id": ..., "embedding": [...]} line per input line to --output (default stdout),
in input order. Texts are embedded as documents (title and text joined, as
annactl index does) unless --query; blank lines are skipped.

--format binary writes instead, all little-endian:
  header  8 bytes "ANNAEMB1", uint32 dim, uint32 flags (bit 0: L2-normalised)
  record  uint32 n, n bytes of the id as JSON text, dim float32 values
records until end of file, in input order. It is refused on a terminal.`,
		Example: `  annactl embed corpus.jsonl --output vectors.jsonl
  echo '{"id": 1, "text": "what is hnsw"}' | annactl embed --query`,
		Args: maxInputArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := oneOf("format", fl.format, "jsonl", "binary"); err != nil {
				return err
			}
			if err := atLeast("batch", fl.batch, 1); err != nil {
				return err
			}
			if err := atLeast("threads", fl.threads, 0); err != nil {
				return err
			}
			if fl.instruction != "" && !fl.asQuery {
				return usageErrorf("--instruction applies to queries: add --query")
			}
			// The model named before any input is read or output made.
			dir, err := modelDir(fl.model)
			if err != nil {
				return err
			}
			fl.model = dir
			in, name, closeIn, err := a.openInput(fl.input, args)
			if err != nil {
				return err
			}
			defer closeIn()
			if fl.output == "" || fl.output == "-" {
				if fl.format == "binary" && isTerminal(a.stdout) {
					return usageErrorf("--format binary would write binary to a terminal: give --output FILE or redirect")
				}
				return a.embed(cmd.Context(), in, name, a.stdout, fl)
			}
			return atomicfile.Write(fl.output, func(f io.Writer) error { return a.embed(cmd.Context(), in, name, f, fl) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.input, "input", "", "JSON lines `FILE` to embed (- for stdin); or give FILE as the argument")
	f.StringVar(&fl.output, "output", "", "output `FILE` (default stdout); written whole or not at all")
	modelVar(f, &fl.model, "model", home.DefaultEmbedModel(), "model directory `DIR` (the default is the one annactl index and the library use)")
	f.BoolVar(&fl.asQuery, "query", false, "embed texts as queries (with --instruction, if given)")
	f.StringVar(&fl.instruction, "instruction", "", "task instruction for queries (formats \"Instruct: {task}\\nQuery: {query}\")")
	f.StringVar(&fl.format, "format", "jsonl", "output format: jsonl or binary")
	f.IntVar(&fl.batch, "batch", 256, "texts embedded per call (bounds memory)")
	f.BoolVar(&fl.cache, "cache", true, cacheUsage)
	f.IntVar(&fl.threads, "threads", 0, "ONNX Runtime threads per operator (0: 1, with batches run in parallel, one per core)")
	return cmd
}

func (a *app) embed(ctx context.Context, in io.Reader, name string, w io.Writer, fl embedFlags) error {
	ort, err := encoder.Open(ctx, fl.model, encoder.Options{IntraOpThreads: fl.threads}) // a model directory or an ensemble's
	if err != nil {
		return err
	}
	defer ort.Close()
	var enc encoder.Encoder = ort
	if fl.cache {
		if enc, err = encoder.NewCache(ort, home.EmbeddingCacheDir()); err != nil {
			return err
		}
	}
	prompt := encoder.Prompt{Instruction: fl.instruction}
	embed := func(texts []string) ([][]float32, error) {
		if fl.asQuery {
			return enc.EmbedQueries(ctx, texts, prompt)
		}
		return enc.EmbedDocuments(ctx, texts)
	}

	out := bufio.NewWriterSize(w, 1<<16)
	if fl.format == "binary" {
		normalized := false // unknown: a model another server runs
		if m, ok := ort.(interface{ Manifest() *model.Manifest }); ok {
			normalized = m.Manifest().Normalize // a model directory's, or an ensemble's (true)
		}
		if err := writeEmbedHeader(out, enc.Dim(), normalized); err != nil {
			return err
		}
	}
	prog := a.progress("embedding", 0)
	defer prog.done()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var ids []json.RawMessage
	var texts []string
	lineNo, done := 0, 0
	flush := func() error {
		if len(texts) == 0 {
			return nil
		}
		vecs, err := embed(texts)
		if err != nil {
			return err
		}
		for i, v := range vecs {
			if err := writeEmbedding(out, fl.format, ids[i], v); err != nil {
				return fmt.Errorf("writing output: %w", err)
			}
		}
		done += len(texts)
		prog.update(done, "texts")
		ids, texts = ids[:0], texts[:0]
		return nil
	}
	for sc.Scan() {
		lineNo++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		id, text, err := parseEmbedLine(line, name, lineNo, fl.asQuery)
		if err != nil {
			return err
		}
		ids = append(ids, id)
		texts = append(texts, text)
		if len(texts) == fl.batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s:%d: %w", name, lineNo+1, err)
	}
	if err := flush(); err != nil {
		return err
	}
	return out.Flush()
}

func writeEmbedding(w *bufio.Writer, format string, id json.RawMessage, v []float32) error {
	if format == "binary" {
		var n [4]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(id)))
		w.Write(n[:])
		w.Write(id)
		buf := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
		}
		_, err := w.Write(buf)
		return err
	}
	w.WriteString(`{"id":`)
	w.Write(id)
	w.WriteString(`,"embedding":[`)
	b := make([]byte, 0, 16)
	for i, x := range v {
		if i > 0 {
			w.WriteByte(',')
		}
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return errors.New("non-finite value in embedding")
		}
		b = appendFloat32(b[:0], x)
		w.Write(b)
	}
	_, err := w.WriteString("]}\n")
	return err
}

// appendFloat32 writes the shortest decimal that reads back as x.
func appendFloat32(b []byte, x float32) []byte {
	return fmt.Appendf(b, "%v", x)
}

// writeEmbedHeader writes the binary format's header: the magic, the
// dimension and whether the vectors are normalized.
func writeEmbedHeader(out io.Writer, dim int, normalized bool) error {
	var hdr [16]byte
	copy(hdr[:], embedMagic)
	binary.LittleEndian.PutUint32(hdr[8:], uint32(dim))
	if normalized {
		binary.LittleEndian.PutUint32(hdr[12:], 1)
	}
	if _, err := out.Write(hdr[:]); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// parseEmbedLine reads one input line {"id" or "_id", "title", "text"}:
// its ID (copied) and the text embedded (a document's title and text).
func parseEmbedLine(line []byte, name string, lineNo int, asQuery bool) (json.RawMessage, string, error) {
	var rec struct {
		ID    json.RawMessage `json:"id"`
		BEIR  json.RawMessage `json:"_id"`
		Title string          `json:"title"`
		Text  *string         `json:"text"`
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		return nil, "", fmt.Errorf("%s:%d: not a JSON object {\"id\", \"text\"}: %w", name, lineNo, err)
	}
	if rec.Text == nil {
		return nil, "", fmt.Errorf("%s:%d: no \"text\" field", name, lineNo)
	}
	id := rec.ID
	if len(id) == 0 {
		id = rec.BEIR
	}
	if len(id) == 0 {
		return nil, "", fmt.Errorf("%s:%d: no \"id\" or \"_id\" field", name, lineNo)
	}
	text := *rec.Text
	if !asQuery {
		text = engine.EmbedText(engine.Document{Title: rec.Title, Text: text})
	}
	return append(json.RawMessage(nil), id...), text, nil
}
