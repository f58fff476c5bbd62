package adapt

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anna-search/anna/doc2query"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/atomicfile"
)

// The decoding settings of generated queries: `annactl doc2query`'s
// defaults (one query a document, sampled at temperature 0.7, top-p 0.9,
// the document cut to 256 tokens), in batches of GenerateBatch documents:
// a stop loses at most one batch, and a cancel waits for at most the
// batch's prompt to be read.
const (
	GenerateTemperature = 0.7
	GenerateTopP        = 0.9
	GenerateBatch       = 4
)

// generatedDir is the BEIR folder doc2query.Run writes into (and reads its
// corpus from): corpus.jsonl the chosen documents, queries.jsonl the
// queries appended a batch at a time.
const generatedDir = "generated"

// generate writes a query for each of n documents chosen with the seed
// with Config.Generator, resuming what Work/generated holds, and returns
// them as pairs (the query, its source document). onRate is called once,
// after the first batch this call decodes, with the measured time a
// document and the documents left.
func (r *run) generate(ctx context.Context, eng *engine.Engine, ids []string, n int, onRate func(perDoc time.Duration, left int)) ([]pair, error) {
	c := &r.cfg
	dir := r.path(generatedDir)
	if err := r.pickDocs(ctx, eng, ids, n, dir); err != nil {
		return nil, err
	}
	r.logf("doc2query: a query for each of %d documents with %s, appended to %s (kept when the run stops; its time is measured on the first batch)",
		n, filepath.Base(c.Generator), beir.QueriesPath(dir))
	g, err := doc2query.Load(c.Generator)
	if err != nil {
		return nil, fmt.Errorf("adapt: %w", err)
	}
	defer g.Close()
	var (
		t0    time.Time
		done0 = -1
		rated bool
	)
	batch := GenerateBatch
	if r.genBatch > 0 {
		batch = r.genBatch
	}
	o := doc2query.Options{PerDoc: 1, Temperature: GenerateTemperature, TopP: GenerateTopP, Seed: c.Seed, Batch: batch,
		Progress: func(done, total int) {
			r.report("documents (doc2query)", done, total)
			switch {
			case done0 < 0:
				t0, done0 = time.Now(), done
			case !rated && done > done0:
				rated = true
				if onRate != nil {
					onRate(time.Since(t0)/time.Duration(done-done0), total-done)
				}
			}
		}}
	if err := doc2query.Run(ctx, g, dir, dir, o); err != nil {
		return nil, fmt.Errorf("adapt: generating queries: %w", err)
	}
	return readGenerated(beir.QueriesPath(dir))
}

// pickDocs writes dir/corpus.jsonl: the first n documents with some text
// in an order the seed decides (a seeded permutation of the IDs' byte
// order). A corpus.jsonl already there (an earlier run's, written whole by
// rename) is kept, so a resumed run writes for the same documents.
func (r *run) pickDocs(ctx context.Context, eng *engine.Engine, ids []string, n int, dir string) error {
	path := beir.CorpusPath(dir)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	perm := rand.New(rand.NewPCG(r.cfg.Seed, 0x64327175)).Perm(len(ids))
	var picked []engine.Document
	for i := 0; i < len(perm) && len(picked) < n; i += 256 {
		chunk := make([]string, 0, 256)
		for _, j := range perm[i:min(i+256, len(perm))] {
			chunk = append(chunk, ids[j])
		}
		docs, err := eng.Get(ctx, chunk...)
		if err != nil {
			return fmt.Errorf("adapt: %w", err)
		}
		for _, d := range docs {
			if len(picked) < n && strings.TrimSpace(d.Title+d.Text) != "" {
				picked = append(picked, d)
			}
		}
	}
	err := atomicfile.Write(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, d := range picked {
			if err := enc.Encode(corpusLine{ID: d.ID, Title: d.Title, Text: d.Text}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	return nil
}

// corpusLine is a line of a BEIR corpus.jsonl.
type corpusLine struct {
	ID    string `json:"_id"`
	Title string `json:"title"`
	Text  string `json:"text"`
}

// readGenerated reads doc2query's queries.jsonl ({"_id", "text", "doc"}
// a line) in its order: each query with its source document.
func readGenerated(path string) ([]pair, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // every generation was empty
	}
	if err != nil {
		return nil, fmt.Errorf("adapt: %w", err)
	}
	defer f.Close()
	var out []pair
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<24)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var l struct {
			Text string `json:"text"`
			Doc  string `json:"doc"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Doc == "" {
			return nil, fmt.Errorf("adapt: %s:%d: not a doc2query line (want {\"_id\", \"text\", \"doc\"}): %v", path, n, err)
		}
		if q := strings.TrimSpace(l.Text); q != "" {
			out = append(out, pair{Query: q, PosIDs: []string{l.Doc}, gen: true})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("adapt: %s: %w", path, err)
	}
	return out, nil
}
