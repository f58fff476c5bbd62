package adapt

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/anna-search/anna/hint"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/format/flagembedding"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/train/bert"
	"github.com/anna-search/anna/internal/train/export"
	"github.com/anna-search/anna/internal/train/objective"
	"github.com/anna-search/anna/mining"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
	"github.com/anna-search/anna/train"
)

func (r *run) path(name string) string { return filepath.Join(r.cfg.Work, name) }

// openIndex opens the index with its recorded model.
func (r *run) openIndex(ctx context.Context) (*engine.Engine, error) {
	eng, err := engine.Open(ctx, r.cfg.Index, engine.Options{Logf: r.cfg.Logf})
	if err != nil {
		return nil, fmt.Errorf("adapt: %w", err)
	}
	return eng, nil
}

// listIDs lists the index's document IDs in byte order.
func listIDs(ctx context.Context, eng *engine.Engine) ([]string, error) {
	return eng.Teacher().IDs(ctx)
}

// PseudoQuery is a document's extractive pseudo-query: its title when it
// has at least three words, else its first sentence (at most 32 words);
// "" when neither has three words.
func PseudoQuery(d engine.Document) string {
	if t := strings.Join(strings.Fields(d.Title), " "); len(strings.Fields(t)) >= 3 {
		return t
	}
	text := d.Text
	if i := strings.IndexFunc(text, sentenceEnd); i > 0 {
		text = text[:i]
	}
	w := strings.Fields(text)
	if len(w) < 3 {
		// Scripts written without spaces (Chinese, Japanese, Thai): the
		// sentence's first 48 characters, if it has 8.
		r := []rune(strings.TrimSpace(text))
		if len(r) < 8 || !unspaced(r) {
			return ""
		}
		return string(r[:min(48, len(r))])
	}
	return strings.Join(w[:min(32, len(w))], " ")
}

// sentenceEnd ends a sentence: . ? ! and a line break, and the full stops
// and marks of other scripts (。？！ Chinese and Japanese, । Hindi, ؟ Arabic).
func sentenceEnd(c rune) bool {
	switch c {
	case '.', '?', '!', '\n', '。', '？', '！', '।', '؟':
		return true
	}
	return false
}

// unspaced reports a text mostly in a script written without spaces.
func unspaced(r []rune) bool {
	n := 0
	for _, c := range r {
		if unicode.In(c, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar) {
			n++
		}
	}
	return 2*n > len(r)
}

type pair struct {
	Query  string   `json:"query"`
	PosIDs []string `json:"pos_ids"`
	// The query's source: generated (doc2query), the query log, else
	// extractive.
	gen, log bool
}

// The query files stage 1 writes: the extractive and generated queries
// (their positive the document they were made from) apart from the logged
// ones (their positive the engine's guess), which stage 2 holds to the
// calibrated threshold.
const (
	trainFile, trainLogFile     = "train.jsonl", "train-log.jsonl"
	heldoutFile, heldoutLogFile = "heldout.jsonl", "heldout-log.jsonl"
)

// heldOut says whether query i of total is held out: every tenth, and the
// last of fewer than ten.
func heldOut(i, total int) bool {
	return i%10 == 9 || (total < 10 && i == total-1 && total > 1)
}

func heldCount(total int) int {
	n := 0
	for i := range total {
		if heldOut(i, total) {
			n++
		}
	}
	return n
}

// queries is stage 1: Work/train.jsonl, Work/heldout.jsonl (extractive
// and generated) and Work/train-log.jsonl, Work/heldout-log.jsonl (the
// query log), pairs of a query and its candidate positive; every tenth
// query held out.
func (r *run) queries(ctx context.Context) error {
	c := &r.cfg
	eng, err := r.openIndex(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	var all []pair
	ids, err := listIDs(ctx, eng)
	if err != nil {
		return fmt.Errorf("adapt: listing the index's documents: %w", err)
	}
	if len(ids) < c.Group {
		return fmt.Errorf("adapt: the index holds %d documents; at least Group (%d) are needed", len(ids), c.Group)
	}
	if !c.NoExtractive {
		for i := 0; i < len(ids); i += 256 {
			docs, err := eng.Get(ctx, ids[i:min(i+256, len(ids))]...)
			if err != nil {
				return fmt.Errorf("adapt: %w", err)
			}
			for _, d := range docs {
				if q := PseudoQuery(d); q != "" {
					all = append(all, pair{Query: q, PosIDs: []string{d.ID}})
				}
			}
			r.report("documents", min(i+256, len(ids)), len(ids))
		}
	}
	if c.Queries != "" {
		logged, err := readLog(c.Queries)
		if err != nil {
			return err
		}
		for i, q := range logged {
			res, err := eng.Search(ctx, q, engine.SearchOptions{Mode: engine.ModeHybrid, K: 1})
			if err != nil {
				return fmt.Errorf("adapt: %s: query %d: %w", c.Queries, i+1, err)
			}
			if len(res) > 0 {
				all = append(all, pair{Query: q, PosIDs: []string{res[0].ID}, log: true})
			}
			r.report("logged queries", i+1, len(logged))
		}
	}
	per := r.embedCost(ctx, eng, ids)
	estimated := false
	if n := c.Generate; n > 0 {
		if c.MaxQueries > 0 && len(all)+n > c.MaxQueries {
			n = max(c.MaxQueries-len(all), 0)
			r.logf("doc2query: %d of the %d queries asked for fit under MaxQueries (%d)", n, c.Generate, c.MaxQueries)
		}
		if n > 0 {
			gen, err := r.generate(ctx, eng, ids, n, func(perDoc time.Duration, left int) {
				total := len(all) + n
				held := heldCount(total)
				r.st.Report.Estimate = perDoc*time.Duration(left) + r.estimateFrom(per, len(ids), total-held, held)
				estimated = true
				r.logf("estimated time on this machine: %s (doc2query %s a document, measured on its first batch, %d documents to go; the rest from the measured time to embed a document)",
					r.st.Report.Estimate.Round(time.Second), perDoc.Round(time.Millisecond), left)
			})
			if err != nil {
				return err
			}
			all = append(all, gen...)
		}
	}
	if c.MaxQueries > 0 && len(all) > c.MaxQueries {
		all = all[:c.MaxQueries]
	}
	files := map[string][]pair{trainFile: nil, trainLogFile: nil, heldoutFile: nil, heldoutLogFile: nil}
	rep := &r.st.Report
	rep.Queries, rep.HeldOut, rep.Generated, rep.Logged = 0, 0, 0, 0
	for i, p := range all {
		name := trainFile
		if heldOut(i, len(all)) {
			name = heldoutFile
			rep.HeldOut++
		} else {
			rep.Queries++
		}
		if p.log {
			name = strings.TrimSuffix(name, ".jsonl") + "-log.jsonl"
			rep.Logged++
		}
		if p.gen {
			rep.Generated++
		}
		files[name] = append(files[name], p)
	}
	if rep.Queries == 0 || rep.HeldOut == 0 {
		return fmt.Errorf("adapt: %d queries (from %d documents, the query log and generation): too few to train and hold some out", len(all), len(ids))
	}
	for name, ps := range files {
		if err := atomicfile.Write(r.path(name), func(w io.Writer) error {
			enc := json.NewEncoder(w)
			for _, p := range ps {
				if err := enc.Encode(p); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("adapt: %w", err)
		}
	}
	if !estimated {
		rep.Estimate = r.estimateFrom(per, len(ids), rep.Queries, rep.HeldOut)
		r.logf("%d queries for training, %d held out (%d generated, %d logged); estimated time on this machine: %s (from the measured time to embed a document)",
			rep.Queries, rep.HeldOut, rep.Generated, rep.Logged, rep.Estimate.Round(time.Second))
	} else {
		r.logf("%d queries for training, %d held out (%d generated, %d logged)", rep.Queries, rep.HeldOut, rep.Generated, rep.Logged)
	}
	return nil
}

// readLog reads a query log: one query a line, blank lines skipped.
func readLog(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("adapt: query log: %w", err)
	}
	defer f.Close()
	var qs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		q := strings.TrimSpace(sc.Text())
		if q == "" {
			continue
		}
		if strings.IndexFunc(q, func(c rune) bool { return c == unicode.ReplacementChar }) >= 0 {
			return nil, fmt.Errorf("adapt: %s:%d: not UTF-8 text", path, n)
		}
		qs = append(qs, q)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("adapt: %s: %w", path, err)
	}
	return qs, nil
}

// embedCost is the measured time to embed one document with the index's
// model (up to 8 embedded, the first call's warm-up left out); 0 when it
// cannot be measured.
//
// Serving the ensemble, it is the time to embed one with every model of
// the ensemble: the index's and each teacher model's, measured alike.
func (r *run) embedCost(ctx context.Context, eng *engine.Engine, ids []string) time.Duration {
	enc, err := eng.Teacher().LoadEncoder(ctx)
	if err != nil {
		return 0
	}
	per := docCost(ctx, eng, enc, ids)
	if r.cfg.Serve == ServeEnsemble && per > 0 {
		for _, dir := range r.cfg.TeacherModels {
			t, err := encoder.Load(ctx, dir, encoder.Options{})
			if err != nil {
				return 0
			}
			per += docCost(ctx, eng, t, ids)
			t.Close()
		}
	}
	return per
}

// docCost is the measured time to embed one of the index's documents with
// enc (up to 8 embedded, the first call's warm-up left out); 0 when it
// cannot be measured.
func docCost(ctx context.Context, eng *engine.Engine, enc encoder.Encoder, ids []string) time.Duration {
	docs, err := eng.Get(ctx, ids[:min(9, len(ids))]...)
	if err != nil || len(docs) < 2 {
		return 0
	}
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.Title + " " + d.Text
	}
	if _, err := enc.EmbedDocuments(ctx, texts[:1]); err != nil {
		return 0
	}
	t := time.Now()
	if _, err := enc.EmbedDocuments(ctx, texts[1:]); err != nil {
		return 0
	}
	return time.Since(t) / time.Duration(len(texts)-1)
}

// estimateFrom is the time of the stages after the queries from the
// counted work and per, the time to embed a document: mining scores ~2
// texts a query, training a step ~3× (forward and backward) its batch's
// texts, the check 2 models × Group texts a held-out query, the reindex
// every document once.
//
// Serving the ensemble (per is then the time of every model's forward),
// the calibration scores ~2 texts a query for at most 256 queries, and
// the reindex embeds every document.
func (r *run) estimateFrom(per time.Duration, docs, queries, held int) time.Duration {
	c := &r.cfg
	if c.Serve == ServeEnsemble {
		return per * time.Duration(2*min(queries, 256)+docs)
	}
	units := 2*(queries+held) + 3*c.Steps*c.BatchQueries*(c.Group+1) + 2*held*c.Group + docs
	return per * time.Duration(units)
}

// miner builds the calibrated fusion teacher over eng (BM25 unless
// TeacherWithoutBM25, the index's model, and extra — the teacher models'
// cosines) and a miner;
// calibrated on train.jsonl (on train-log.jsonl when train.jsonl is
// empty), the calibration kept in Work/teacher.json.
func (r *run) miner(ctx context.Context, eng *engine.Engine, extra []mining.Teacher, progress func(done, total int)) (*mining.Miner, error) {
	enc, err := eng.Teacher().LoadEncoder(ctx)
	if err != nil {
		return nil, fmt.Errorf("adapt: %w", err)
	}
	signals := []mining.Teacher{&mining.DenseTeacher{Enc: enc, Label: "dense:" + eng.Model().Label(), Vectors: mining.StoredVectors(eng)}}
	if !r.cfg.TeacherWithoutBM25 {
		signals = append([]mining.Teacher{mining.MaxNormalized{Teacher: mining.EngineLexical{E: eng}}}, signals...)
	}
	signals = append(signals, extra...)
	teacher := &mining.FusionTeacher{Signals: signals}
	mode := r.cfg.NegativesFrom
	if mode == "" {
		mode = engine.ModeHybrid
	}
	m, err := mining.New(&mining.EngineRetriever{E: eng, Mode: mode}, teacher, mining.EngineCorpus{E: eng}, r.minerOptions(progress))
	if err != nil {
		return nil, err
	}
	path := r.path("teacher.json")
	cal, err := r.savedCalibration()
	if err != nil {
		return nil, err
	}
	if cal != nil {
		teacher.Cal = cal
		return m, nil
	}
	calFile := trainFile // the queries whose positive is known; the log's when there are none
	if n, err := countLines(r.path(calFile)); err == nil && n == 0 {
		calFile = trainLogFile
	}
	src, err := mining.OpenPairs(ctx, r.path(calFile), mining.PromptDefaults{})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	r.logf("calibrating the fusion teacher on up to 256 queries of %s", calFile)
	cal, err = m.Calibrate(ctx, src, 256, teacher)
	if err == nil {
		var bs []byte
		if bs, err = json.MarshalIndent(cal, "", "  "); err == nil {
			err = atomicfile.WriteBytes(path, append(bs, '\n'))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("adapt: calibrating the teacher: %w", err)
	}
	return m, nil
}

// savedCalibration is the teacher's calibration kept in Work/teacher.json,
// nil when there is none to read.
func (r *run) savedCalibration() (*mining.Calibration, error) {
	path := r.path("teacher.json")
	bs, err := os.ReadFile(path)
	if err != nil {
		return nil, nil
	}
	var cal mining.Calibration
	if err := json.Unmarshal(bs, &cal); err != nil {
		return nil, fmt.Errorf("adapt: %s: %w (delete it to calibrate again)", path, err)
	}
	return &cal, nil
}

// minerOptions are the miner's settings: Group−1 negatives, resumable, a
// positive kept only where the teacher ranks it first.
func (r *run) minerOptions(progress func(done, total int)) mining.Options {
	opt := mining.DefaultOptions()
	opt.Negatives, opt.Seed, opt.Resume, opt.Workers, opt.RequireTop = r.cfg.Group-1, r.cfg.Seed, true, runtime.GOMAXPROCS(0), 1
	opt.Progress = progress
	return opt
}

// mine is stage 2: the engine's miner over mineAll.
func (r *run) mine(ctx context.Context) error {
	eng, err := r.openIndex(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	// Each teacher model embeds the corpus once for the four query files.
	ts, err := r.teacherEncoders(ctx, eng)
	if err != nil {
		return err
	}
	defer closeTeachers(ts)
	extra := denseSignals(ts)
	return r.mineAll(ctx, func(progress func(done, total int)) (*mining.Miner, error) {
		return r.miner(ctx, eng, extra, progress)
	})
}

// newMinerFunc makes a miner reporting its progress.
type newMinerFunc func(progress func(done, total int)) (*mining.Miner, error)

// mined is one query file's mining: input, output, and whether its
// positives are a query log's guesses.
var minedFiles = []struct {
	in, out string
	log     bool
}{
	{trainFile, "mined-made.jsonl", false}, {trainLogFile, "mined-log.jsonl", true},
	{heldoutFile, "heldout-mined-made.jsonl", false}, {heldoutLogFile, "heldout-mined-log.jsonl", true},
}

// mineAll mines each query file (each query's positive kept only when the
// teacher ranks it first), then writes Work/mined.jsonl (training) and
// Work/heldout-mined.jsonl (the check's pseudo-labels): the extractive and
// generated queries' examples, and the logged queries' examples whose
// positive's teacher score reaches the threshold (logThreshold over the
// training extractive and generated positives' scores).
func (r *run) mineAll(ctx context.Context, newMiner newMinerFunc) error {
	rep := &r.st.Report
	rep.Examples, rep.Filtered = 0, 0
	for _, f := range minedFiles {
		total, err := countLines(r.path(f.in))
		if err != nil {
			return err
		}
		if total == 0 {
			if err := atomicfile.WriteBytes(r.path(f.out), nil); err != nil {
				return fmt.Errorf("adapt: %w", err)
			}
			continue
		}
		src, err := mining.OpenPairs(ctx, r.path(f.in), mining.PromptDefaults{})
		if err != nil {
			return err
		}
		m, err := newMiner(func(done, _ int) { r.report("queries ("+f.in+")", done, total) })
		if err != nil {
			src.Close()
			return err
		}
		r.t0 = time.Time{}
		st, err := m.Run(ctx, src, r.path(f.out))
		src.Close()
		if err != nil {
			return err
		}
		r.logf("mined %s: %d examples from %d queries; %d positives the teacher did not rank first left out", f.in, st.Examples, st.Units, st.FilteredPositives)
		if f.in == trainFile || f.in == trainLogFile {
			rep.Filtered += st.FilteredPositives
		}
	}
	ref, err := posScores(r.path(minedFiles[0].out))
	if err != nil {
		return err
	}
	thr := logThreshold(ref)
	rep.LogThreshold, rep.LogReference = thr, 0
	if len(ref) >= MinReference {
		rep.LogReference = len(ref)
	}
	if r.cfg.LogThreshold != nil {
		thr, rep.LogThreshold, rep.LogReference = *r.cfg.LogThreshold, *r.cfg.LogThreshold, -1
		if math.IsInf(thr, -1) {
			rep.LogThreshold = -math.MaxFloat64 // JSON has no -Inf: every score reaches it alike
		}
	}
	n, kept, dropped, err := r.assemble("mined.jsonl", minedFiles[0].out, minedFiles[1].out, thr)
	if err != nil {
		return err
	}
	rep.Examples, rep.LogKept, rep.LogDropped = n, kept, dropped
	if _, hk, hd, err := r.assemble("heldout-mined.jsonl", minedFiles[2].out, minedFiles[3].out, thr); err != nil {
		return err
	} else if kept+dropped+hk+hd > 0 {
		how := fmt.Sprintf("the %g quantile of the teacher's scores of %d confirmed extractive and generated positives", LogQuantile, len(ref))
		switch rep.LogReference {
		case -1:
			how = "given (LogThreshold, --log-threshold)"
		case 0:
			how = fmt.Sprintf("even odds: %d confirmed extractive and generated positives are too few (%d needed) to take a quantile", len(ref), MinReference)
		}
		r.logf("logged queries: the teacher's score of the top document must reach %.3f (%s): %d kept, %d dropped for training; %d kept, %d dropped held out",
			thr, how, kept, dropped, hk, hd)
	}
	if rep.Examples == 0 {
		return errors.New("adapt: the teacher confirmed no training query's positive: nothing to train on")
	}
	return nil
}

// LogQuantile is the quantile of the confirmed extractive and generated
// positives' teacher scores a logged query's top document must reach;
// MinReference the fewest such scores a quantile is taken of (fewer: the
// threshold is 0, even odds).
const (
	LogQuantile  = 0.1
	MinReference = 20
)

// logThreshold is the teacher score a logged query's positive must reach:
// the LogQuantile quantile (nearest rank) of ref, or 0 (the calibrated
// log-odds of even odds) when ref has fewer than MinReference scores.
func logThreshold(ref []float64) float64 {
	if len(ref) < MinReference {
		return 0
	}
	s := slices.Clone(ref)
	slices.Sort(s)
	k := int(math.Ceil(LogQuantile*float64(len(s)))) - 1
	return s[max(k, 0)]
}

// posScores reads the teacher scores of the positives of a mined file.
func posScores(path string) ([]float64, error) {
	var out []float64
	err := eachRecord(path, func(_ []byte, rec flagembedding.Record) error {
		out = append(out, rec.PosScores...)
		return nil
	})
	return out, err
}

// assemble writes Work/out: made's lines, then log's lines whose positive
// scores reach thr; it returns the lines written and log's kept and
// dropped.
func (r *run) assemble(out, made, log string, thr float64) (n, kept, dropped int, err error) {
	err = atomicfile.Write(r.path(out), func(w io.Writer) error {
		if err := eachRecord(r.path(made), func(line []byte, rec flagembedding.Record) error {
			n++
			if !r.cfg.KeepQueryInPositive && Cloze(&rec) {
				b, err := json.Marshal(rec)
				if err != nil {
					return err
				}
				line = append(b, '\n')
			}
			_, err := w.Write(line)
			return err
		}); err != nil {
			return err
		}
		return eachRecord(r.path(log), func(line []byte, rec flagembedding.Record) error {
			if len(rec.PosScores) == 0 || slices.Min(rec.PosScores) < thr {
				dropped++
				return nil
			}
			kept++
			n++
			_, err := w.Write(line)
			return err
		})
	})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("adapt: %w", err)
	}
	return n, kept, dropped, nil
}

// Cloze removes an extractive query from its positives, the inverse-cloze
// task (Lee et al., 2019): a title or sentence cut from a document is found
// in it verbatim, so the student learns nothing from matching it; without
// it, the query must be matched to the rest of the document's text. A
// positive left with fewer than clozeMinWords words is kept whole. It
// reports whether rec changed. Generated queries are rarely verbatim in
// their document and pass unchanged.
func Cloze(rec *flagembedding.Record) bool {
	changed := false
	for i, p := range rec.Pos {
		j := strings.Index(p, rec.Query)
		if rec.Query == "" || j < 0 {
			continue
		}
		rest := strings.Fields(p[:j] + " " + p[j+len(rec.Query):])
		if len(rest) < clozeMinWords {
			continue
		}
		rec.Pos[i], changed = strings.Join(rest, " "), true
	}
	return changed
}

// clozeMinWords is the fewest words a positive keeps after cloze.
const clozeMinWords = 8

// eachRecord calls fn with each line (its newline included) of a mined
// file and its record; a missing file has none (a work folder begun
// before the query log was mined apart).
func eachRecord(path string, fn func(line []byte, rec flagembedding.Record) error) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var rec flagembedding.Record
			if jerr := json.Unmarshal(line, &rec); jerr != nil {
				return fmt.Errorf("adapt: %s:%d: %w", path, n, jerr)
			}
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			if ferr := fn(line, rec); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("adapt: %s: %w", path, err)
		}
	}
}

// countLines counts a file's non-blank lines; a missing file has none.
func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("adapt: %w", err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<26)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("adapt: %s: %w", path, err)
	}
	return n, nil
}

// base is the student's starting checkpoint: Config.Base, else what the
// index's model trains from (catalog.Checkpoint: its manifest's source
// when here, else for a catalogue model, NAME-int8 included, its
// training source); an int8 student is converted back to int8 before the
// check (served). maxLen is the index's model's served length, which the
// student keeps (0 when the index's model cannot be read and Base is
// given: the import path's default). Checkpoints rarely say it (MiniLM's
// says 512 positions; it is served at 256), and a student served longer
// than its base embeds long documents worse: all-MiniLM-L6-v2's own
// weights served at 512 lose 0.0075 dense nDCG@10 on Cranfield, 0.0107 on
// SciFact.
func (r *run) base(ctx context.Context, eng *engine.Engine) (src string, maxLen int, err error) {
	dir, man, err := indexManifest(eng)
	if r.cfg.Base != "" {
		if err == nil {
			maxLen = man.MaxLength
		}
		return r.cfg.Base, maxLen, nil
	}
	if err != nil {
		return "", 0, hint.Wrap(fmt.Errorf("adapt: the index's model: %w (give the student's checkpoint)", err), append(hint.Of(err), baseHint)...)
	}
	src, err = catalog.Checkpoint(ctx, dir, catalog.Options{ModelsDir: filepath.Dir(dir), DownloadsDir: home.DownloadsDir(), Sources: home.SourceDir()})
	if err != nil {
		return "", 0, hint.Wrap(fmt.Errorf("adapt: the index's model %s: %w (or give the student's checkpoint)", man.Name, err), append(hint.Of(err), baseHint)...)
	}
	return src, man.MaxLength, nil
}

// baseHint is what to do when the index's model has no checkpoint to train:
// give one (Config.Base), after what the error itself suggests.
var baseHint = hint.Action{Kind: hint.SetOption, Option: "adapt.Config.Base", Value: "DIR"}

// train is stage 3: the student, contrastive with distillation, in
// Work/student (checkpoint/, model/), resuming from its checkpoint.
func (r *run) train(ctx context.Context) error {
	c := &r.cfg
	eng, err := r.openIndex(ctx)
	if err != nil {
		return err
	}
	base, maxLen, err := r.base(ctx, eng)
	eng.Close()
	if err != nil {
		return err
	}
	tc := train.Config{ModelDir: base, Data: r.path("mined.jsonl"), OutDir: r.path("student"), Objective: train.ObjectiveContrastive,
		DistillWeight: c.Distill, MaxLength: c.MaxLength, BatchSize: c.BatchQueries, GroupSize: c.Group, MaxSteps: c.Steps,
		LR: c.LR, Seed: c.Seed, EvalFraction: -1, CheckpointEvery: c.CheckpointEvery, Resume: true, Name: "adapted",
		ExportMaxLength: maxLen,
		Progress: func(p train.Progress) {
			if p.Eval == nil {
				r.report("steps", p.Step, p.Steps)
			}
		}}
	res, err := train.Run(ctx, tc)
	if err != nil {
		return err
	}
	r.st.Report.Steps, r.st.Report.Model, r.st.Report.Trained = res.Steps, res.ModelDir, res.ModelDir
	if c.Mix < 1 {
		trained, err := model.LoadManifest(res.ModelDir)
		if err != nil {
			return fmt.Errorf("adapt: the trained student: %w", err)
		}
		if trained.Architecture != "bert" {
			r.logf("the student (%s) is served as trained: weight mixing is for BERT students", trained.Architecture)
			return nil
		}
		// served as the trained student is (its length already bounded
		// by the positions)
		if r.st.Report.Model, err = r.mix(ctx, base, res.HFDir, trained.MaxLength); err != nil {
			return err
		}
	}
	return nil
}

// mix writes the served BERT student, base + Mix·(trained − base) weight
// by weight (bert.Model.Interpolate), into Work/student-mix (replaced
// whole), served at maxLen tokens.
func (r *run) mix(ctx context.Context, base, trainedHF string, maxLen int) (string, error) {
	b, err := bert.LoadModel(base, false, 1)
	if err != nil {
		return "", fmt.Errorf("adapt: the student's start: %w", err)
	}
	m, err := bert.LoadModel(trainedHF, false, 1)
	if err != nil {
		return "", fmt.Errorf("adapt: the trained student: %w", err)
	}
	if err := m.Interpolate(b, float32(r.cfg.Mix)); err != nil {
		return "", fmt.Errorf("adapt: %w", err)
	}
	out := r.path("student-mix")
	if err := os.RemoveAll(out); err != nil {
		return "", fmt.Errorf("adapt: %w", err)
	}
	_, dir, err := m.Export(ctx, base, out, export.Settings{Name: "adapted", MaxLength: maxLen})
	if err != nil {
		return "", fmt.Errorf("adapt: the mixed student: %w", err)
	}
	return dir, nil
}

// heldExample is a held-out query with the teacher's top document first.
type heldExample struct {
	Query string   `json:"query"`
	Pos   []string `json:"pos"`
	Neg   []string `json:"neg"`
}

// check is stage 4: the student's and the base model's nDCG@10 on the
// held-out queries, the teacher's top document the one relevant among
// its candidates. ErrWorse when the student is below base + MinGain.
func (r *run) check(ctx context.Context) error {
	eng, err := r.openIndex(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	baseEnc, err := eng.Teacher().LoadEncoder(ctx)
	if err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	served, err := r.served(ctx, eng)
	if err != nil {
		return err
	}
	student, err := encoder.Load(ctx, served, encoder.Options{})
	if err != nil {
		return fmt.Errorf("adapt: the student: %w", err)
	}
	defer student.Close()
	rep := &r.st.Report
	if r.cfg.Judged != "" || len(r.cfg.TeacherModels) > 0 {
		rep.Check = CheckCorpus
		if r.cfg.Judged != "" {
			rep.Check = CheckJudged
		}
		qs, err := r.checkQueries(ctx, eng, false)
		if err != nil {
			return err
		}
		sc, err := encoder.NewCache(student, r.path("student-vectors"))
		if err != nil {
			return fmt.Errorf("adapt: the student's vectors: %w", err)
		}
		cs, err := r.corpusCheck(ctx, eng, baseEnc, sc, qs, false)
		if err != nil {
			return err
		}
		rep.BaseScore, rep.StudentScore = cs.Base, cs.Student
		rep.CheckQueries = len(qs)
		return r.verdict()
	}
	bs, err := os.ReadFile(r.path("heldout-mined.jsonl"))
	if err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	var exs []heldExample
	for i, line := range strings.Split(strings.TrimSpace(string(bs)), "\n") {
		var ex heldExample
		if line == "" {
			continue
		}
		if err := json.Unmarshal([]byte(line), &ex); err != nil {
			return fmt.Errorf("adapt: heldout-mined.jsonl:%d: %w", i+1, err)
		}
		if len(ex.Pos) > 0 && len(ex.Neg) > 0 {
			exs = append(exs, ex)
		}
	}
	if len(exs) == 0 {
		return fmt.Errorf("%w: no held-out query kept a teacher-confirmed document, so nothing shows the student is not worse; the index is left on its model", ErrWorse)
	}
	// The index's model's side reads the index's stored vectors where they
	// are what it would embed (storedVectors); the student embeds all.
	var stored *storedVectors
	if !r.embedBase {
		if stored, err = newStoredVectors(ctx, eng); err != nil {
			return err
		}
	}
	var sb, ss float64
	for i, ex := range exs {
		b, err := ndcg(ctx, baseEnc, ex, stored)
		if err != nil {
			return err
		}
		s, err := ndcg(ctx, student, ex, nil)
		if err != nil {
			return err
		}
		sb, ss = sb+b, ss+s
		r.report("held-out queries", i+1, len(exs))
	}
	if stored != nil {
		r.storedHits = stored.hits
		r.logf("held-out check: %d of the index's model's %d candidate vectors read from the index, the rest embedded", stored.hits, len(exs)*r.cfg.Group)
	}
	rep.BaseScore, rep.StudentScore, rep.CheckQueries, rep.Check = sb/float64(len(exs)), ss/float64(len(exs)), len(exs), CheckCandidates
	return r.verdict()
}

// verdict logs the check's scores and returns ErrWorse when the student
// is below the index's model plus MinGain.
func (r *run) verdict() error {
	rep := &r.st.Report
	r.logf("held-out check on %d queries (%s): nDCG@10 of the index's model %.4f, the adapted model %.4f (%s, as it will serve)", rep.CheckQueries, rep.Check, rep.BaseScore, rep.StudentScore, precisionName(rep.Precision))
	if rep.StudentScore < rep.BaseScore+r.cfg.MinGain {
		return fmt.Errorf("adapt: %w (nDCG@10 %.4f against %.4f on %d held-out queries, %s, %g gain required): the index keeps its model; the adapted one is in %s",
			ErrWorse, rep.StudentScore, rep.BaseScore, rep.CheckQueries, rep.Check, r.cfg.MinGain, rep.Served)
	}
	return nil
}

// ndcg is nDCG@10 of ex's positive among its candidates ranked by enc's
// cosine (positiveNDCG of cosines).
func ndcg(ctx context.Context, enc encoder.Encoder, ex heldExample, stored *storedVectors) (float64, error) {
	cos, err := cosines(ctx, enc, ex, stored)
	if err != nil {
		return 0, err
	}
	return positiveNDCG(cos), nil
}

// cosines are enc's cosines of ex's query with its positive (first) and
// its negatives. A candidate stored (not nil) holds a vector of enc's
// model for is not embedded.
func cosines(ctx context.Context, enc encoder.Encoder, ex heldExample, stored *storedVectors) ([]float64, error) {
	q, err := enc.EmbedQueries(ctx, []string{ex.Query}, encoder.Prompt{})
	if err != nil {
		return nil, fmt.Errorf("adapt: %w", err)
	}
	texts := append([]string{ex.Pos[0]}, ex.Neg...)
	d := make([][]float32, len(texts))
	var missing []string
	var at []int
	for i, t := range texts {
		if stored != nil {
			v, ok, err := stored.lookup(ctx, t)
			if err != nil {
				return nil, err
			}
			if ok {
				d[i] = v
				continue
			}
		}
		missing, at = append(missing, t), append(at, i)
	}
	if err := embedInto(ctx, enc, d, missing, at); err != nil {
		return nil, err
	}
	for _, v := range d {
		if len(v) != len(q[0]) {
			return nil, fmt.Errorf("adapt: a candidate's vector has %d dimensions, the query's %d", len(v), len(q[0]))
		}
	}
	cos := make([]float64, len(d))
	for i, v := range d {
		cos[i] = objective.Dot(q[0], v)
	}
	return cos, nil
}

// positiveNDCG is nDCG@10 of the first candidate, the one relevant, ranked
// by cos; ties rank it last.
func positiveNDCG(cos []float64) float64 {
	rank := 1
	for _, c := range cos[1:] {
		if c >= cos[0] {
			rank++
		}
	}
	if rank > 10 {
		return 0
	}
	return 1 / math.Log2(float64(rank)+1)
}

// reindex is stage 5: the index re-embedded with the student at the
// index's precision (served: the check recorded it).
func (r *run) reindex(ctx context.Context) error {
	eng, err := engine.Open(ctx, r.cfg.Index, engine.Options{Logf: r.cfg.Logf, KeepModel: r.cfg.KeepModel})
	if err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	defer eng.Close()
	served := r.st.Report.Served // the ensemble's, recorded by its stage
	if r.cfg.Serve != ServeEnsemble {
		if served, err = r.served(ctx, eng); err != nil {
			return err
		}
	}
	opts := engine.ReindexOptions{Model: served, Progress: func(done, total int) { r.report("documents", done, total) }}
	if c := r.st.Report.Check; c == CheckCorpus || c == CheckJudged {
		// The check embedded every document with the student: read back.
		enc, err := encoder.Load(ctx, served, encoder.Options{})
		if err != nil {
			return fmt.Errorf("adapt: the student: %w", err)
		}
		defer enc.Close()
		if opts.Encoder, err = encoder.NewCache(enc, r.path("student-vectors")); err != nil {
			return fmt.Errorf("adapt: the student's vectors: %w", err)
		}
	}
	err = eng.Reindex(ctx, opts)
	if err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	r.st.Report.Reindexed = true
	return nil
}
