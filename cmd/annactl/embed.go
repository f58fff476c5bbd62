package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/home"
)

func init() {
	register(command{
		name:    "embed",
		summary: "embed JSON lines {\"id\",\"text\"} into vectors (JSON lines or binary)",
		run: func(ctx context.Context, args []string) error {
			return runEmbed(ctx, args, os.Stdin, os.Stdout, os.Stderr)
		},
	})
}

// embedMagic starts the binary output format.
const embedMagic = "ANNAEMB1"

const embedUsage = `usage: annactl embed [flags] [FILE]

Reads JSON lines {"id": <any JSON value>, "text": "..."} from FILE (or stdin)
and writes one {"id": ..., "embedding": [...]} line per input line to stdout.
Blank lines are skipped. Texts are embedded as documents unless --query.

--format binary writes instead, all little-endian:
  header  8 bytes "ANNAEMB1", uint32 dim, uint32 flags (bit 0: L2-normalised)
  record  uint32 n, n bytes of the id as JSON text, dim float32 values
records until end of file, in input order.

flags:`

func runEmbed(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("embed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, embedUsage)
		fs.PrintDefaults()
	}
	modelDir := fs.String("model", home.DefaultModel(), "converted model directory")
	asQuery := fs.Bool("query", false, "embed texts as queries (with --instruction, if given)")
	asDoc := fs.Bool("document", false, "embed texts as documents (the default)")
	instruction := fs.String("instruction", "", "task instruction for queries (formats \"Instruct: {task}\\nQuery: {query}\")")
	format := fs.String("format", "jsonl", "output format: jsonl or binary")
	chunk := fs.Int("chunk", 256, "lines embedded per call (bounds memory)")
	useCache := fs.Bool("cache", false, "read and fill the embedding cache under $ANNA_HOME/cache/embeddings")
	threads := fs.Int("threads", 0, "ONNX Runtime threads per operator (0: 1, with batches run in parallel, one per core)")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *asQuery && *asDoc {
		return fmt.Errorf("--query and --document are exclusive")
	}
	if *instruction != "" && !*asQuery {
		return fmt.Errorf("--instruction applies to queries: add --query")
	}
	if *format != "jsonl" && *format != "binary" {
		return fmt.Errorf("--format %q: want jsonl or binary", *format)
	}
	if *chunk <= 0 {
		return fmt.Errorf("--chunk must be positive")
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return errUsage
	}
	in, name := stdin, "stdin"
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return fmt.Errorf("opening input: %w", err)
		}
		defer f.Close()
		in, name = f, fs.Arg(0)
	}

	ort, err := encoder.Load(ctx, *modelDir, encoder.Options{IntraOpThreads: *threads})
	if err != nil {
		return err
	}
	defer ort.Close()
	var enc encoder.Encoder = ort
	if *useCache {
		if enc, err = encoder.NewCache(ort, ""); err != nil {
			return err
		}
	}
	prompt := encoder.Prompt{Instruction: *instruction}
	embed := func(texts []string) ([][]float32, error) {
		if *asQuery {
			return enc.EmbedQueries(ctx, texts, prompt)
		}
		return enc.EmbedDocuments(ctx, texts)
	}

	out := bufio.NewWriterSize(stdout, 1<<16)
	defer out.Flush()
	if *format == "binary" {
		var hdr [16]byte
		copy(hdr[:], embedMagic)
		binary.LittleEndian.PutUint32(hdr[8:], uint32(enc.Dim()))
		if ort.Manifest().Normalize {
			binary.LittleEndian.PutUint32(hdr[12:], 1)
		}
		if _, err := out.Write(hdr[:]); err != nil {
			return fmt.Errorf("writing output: %w", err)
		}
	}
	prog := newEmbedProgress(stderr)
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
			if err := writeEmbedding(out, *format, ids[i], v); err != nil {
				return fmt.Errorf("writing output: %w", err)
			}
		}
		done += len(texts)
		prog.update(done)
		ids, texts = ids[:0], texts[:0]
		return nil
	}
	for sc.Scan() {
		lineNo++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var rec struct {
			ID   json.RawMessage `json:"id"`
			Text *string         `json:"text"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("%s line %d: not a JSON object {\"id\", \"text\"}: %w", name, lineNo, err)
		}
		if rec.Text == nil {
			return fmt.Errorf("%s line %d: no \"text\" field", name, lineNo)
		}
		if len(rec.ID) == 0 {
			rec.ID = json.RawMessage("null")
		}
		ids = append(ids, append(json.RawMessage(nil), rec.ID...))
		texts = append(texts, *rec.Text)
		if len(texts) == *chunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s line %d: %w", name, lineNo+1, err)
	}
	if err := flush(); err != nil {
		return err
	}
	prog.finish(done)
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

// embedProgress prints texts done and the rate on stderr when stderr is a
// terminal; in a pipe it stays silent.
type embedProgress struct {
	w     io.Writer
	on    bool
	start time.Time
	last  time.Time
}

func newEmbedProgress(w io.Writer) *embedProgress {
	on := false
	if f, ok := w.(*os.File); ok {
		on = term.IsTerminal(int(f.Fd()))
	}
	return &embedProgress{w: w, on: on, start: time.Now()}
}

func (p *embedProgress) update(done int) {
	if !p.on || time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "\r\033[Kembed: %d texts, %.1f/s", done, float64(done)/time.Since(p.start).Seconds())
}

func (p *embedProgress) finish(done int) {
	if p.on {
		fmt.Fprintf(p.w, "\r\033[Kembed: %d texts in %s\n", done, time.Since(p.start).Round(time.Millisecond))
	}
}
