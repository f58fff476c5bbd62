package mining

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/anna-search/anna/internal/safe"
)

// Miner mines hard negatives with one retriever, teacher and corpus.
type Miner struct {
	retriever Retriever
	teacher   Teacher
	corpus    Corpus
	opt       Options
}

// New checks the options and returns a miner.
func New(r Retriever, t Teacher, c Corpus, opt Options) (*Miner, error) {
	if r == nil || t == nil || c == nil {
		return nil, errors.New("mining: retriever, teacher and corpus are all required")
	}
	if err := opt.validate(); err != nil {
		return nil, err
	}
	return &Miner{retriever: r, teacher: t, corpus: c, opt: opt}, nil
}

// errBadInput marks a unit whose input is wrong (as opposed to a failing
// retriever or teacher): --skip-bad skips those only.
type errBadInput struct{ err error }

func (e errBadInput) Error() string { return e.err.Error() }
func (e errBadInput) Unwrap() error { return e.err }

func badInput(err error) error { return errBadInput{err} }

// result is one processed unit, encoded and ready to write.
type result struct {
	seq   int // position among the units of this input (reorder key)
	where string
	out   []byte
	stats Stats
	err   error
}

// process turns one unit into output bytes and its stats.
func (m *Miner) process(ctx context.Context, u Unit) result {
	r := result{seq: u.seq, where: u.Where}
	r.stats.Units = 1
	if u.Err != nil {
		r.err = badInput(u.Err)
		return r
	}
	r.stats.DuplicatePairs = u.DupPairs
	if len(u.Positives) == 0 {
		return r // every pair was a duplicate of an earlier line
	}
	p, err := m.prepare(ctx, &u)
	if err != nil {
		r.err = err
		return r
	}
	r.stats.add(&p.stats)
	if len(p.posTexts) == 0 {
		// No positive in the corpus, or the teacher ranked none within
		// RequireTop.
		r.stats.QueriesDropped = 1
		if p.stats.FilteredPositives > 0 {
			r.stats.QueriesDroppedTop = 1
		} else {
			r.stats.QueriesDroppedMissing = 1
		}
		return r
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	short := false
	emit := func(ex int, pos []string, posScores []float64) error {
		negs := sample(p.kept, m.opt.Negatives, m.opt.Sampling, exampleRNG(m.opt.Seed, u.Index, ex))
		if len(negs) < m.opt.Negatives {
			short = true
			r.stats.ShortExamples++
		}
		if len(negs) < m.opt.MinNegatives || (m.opt.Format == FormatNTuple && len(negs) < m.opt.Negatives) {
			r.stats.DroppedExamples++
			if p.stats.filtered() > 0 {
				r.stats.DroppedByFilters++
			}
			return nil
		}
		for i, s := range posScores {
			r.stats.PosScores.observe(s, hash64("pos", itoa(u.Index), itoa(ex), itoa(i)))
		}
		for i, n := range negs {
			r.stats.NegScores.observe(n.Teacher, hash64("neg", itoa(u.Index), itoa(ex), itoa(i)))
		}
		r.stats.Examples++
		r.stats.Negatives += len(negs)
		lines, err := m.encode(enc, u.Query, pos, posScores, negs)
		r.stats.Lines += lines
		return err
	}
	if m.opt.Grouped {
		err = emit(0, p.posTexts, p.posScores)
	} else {
		for i := range p.posTexts {
			if err = emit(i, p.posTexts[i:i+1], p.posScores[i:i+1]); err != nil {
				break
			}
		}
	}
	if err != nil {
		r.err = fmt.Errorf("encode output: %w", err)
		return r
	}
	if short {
		r.stats.ShortUnits = 1
	}
	if r.stats.Examples == 0 {
		r.stats.QueriesDropped = 1
		if p.stats.filtered() > 0 {
			r.stats.QueriesDroppedFiltered = 1
		}
	}
	r.out = buf.Bytes()
	return r
}

func itoa(i int) string { return fmt.Sprint(i) }

// Run mines every unit of src into the file at out. With opt.Resume it
// continues an interrupted run of the same configuration. It returns the
// stats of the whole output (including the part written before a resume).
// When ctx is cancelled it stops at a unit boundary, checkpoints, and returns
// the context's error: the run can then be resumed.
func (m *Miner) Run(ctx context.Context, src Source, out string) (*Stats, error) {
	ctx = safe.Ctx(ctx)
	cfg := m.configKey(src)
	ck, f, err := openOutput(out, cfg, m.opt.Resume)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	stats := &ck.Stats
	stats.Teacher = m.teacher.Name()
	if ck.Done {
		return stats, nil
	}
	// Skip what is already written.
	for i := 0; i < ck.Units; i++ {
		if _, err := src.Next(ctx); err != nil {
			if err == io.EOF {
				return nil, fmt.Errorf("resume %s: progress says %d units done but the input has only %d", out, ck.Units, i)
			}
			return nil, err
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := m.opt.Workers
	units := make(chan Unit)
	results := make(chan result, w)
	// tokens bound the units between reading and writing, so a slow unit
	// cannot make the reorder buffer grow without limit.
	tokens := make(chan struct{}, 4*w)
	var readErr error
	readDone := make(chan struct{})
	var wg sync.WaitGroup
	go func() {
		defer close(readDone)
		defer close(units)
		for seq := ck.Units; ; seq++ {
			select {
			case tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
			var u Unit
			err := safe.Call(func() (err error) { u, err = src.Next(ctx); return err })
			if err != nil {
				if err != io.EOF {
					readErr = err
					cancel()
				}
				return
			}
			u.seq = seq
			select {
			case units <- u:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range units {
				var r result
				if err := safe.Call(func() error { r = m.process(ctx, u); return nil }); err != nil {
					r = result{seq: u.seq, where: u.Where, err: err} // a panic: fails the run
				}
				select {
				case results <- r:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()

	cw := &checkpointer{path: out, f: f, ck: ck, every: m.opt.CheckpointEvery}
	pending := map[int]result{}
	next := ck.Units
	total := src.Len()
	var runErr error
loop:
	for r := range results {
		pending[r.seq] = r
		for {
			r, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			if r.err != nil {
				var bad errBadInput
				if !m.opt.SkipBad || !errors.As(r.err, &bad) {
					runErr = fmt.Errorf("%s: %w", r.where, r.err)
					cancel()
					break loop
				}
				r.stats = Stats{Units: 1, BadUnits: 1}
				r.out = nil
			}
			if err := cw.write(r); err != nil {
				runErr = err
				cancel()
				break loop
			}
			next++
			<-tokens
			if m.opt.Progress != nil {
				m.opt.Progress(next, total)
			}
		}
	}
	// Drain so the workers and reader can exit.
	for range results {
	}
	<-readDone
	if runErr == nil && readErr != nil {
		runErr = fmt.Errorf("read input: %w", readErr)
	}
	if runErr == nil && ctx.Err() != nil {
		runErr = ctx.Err()
	}
	if runErr == nil && len(pending) > 0 {
		runErr = fmt.Errorf("mining: %d units processed out of order were never written", len(pending))
	}
	cw.ck.Done = runErr == nil
	if err := cw.checkpoint(); err != nil && runErr == nil {
		runErr = err
	}
	return stats, runErr
}

// configKey identifies the settings that shape the output; resuming with
// different ones would mix two outputs in one file.
func (m *Miner) configKey(src Source) string {
	o := m.opt
	retr := "retriever"
	if n, ok := m.retriever.(interface{ Name() string }); ok {
		retr = n.Name()
	}
	key := fmt.Sprintf("v1|%s|%s|%s|n=%d|k=%d|m=%v|abs=%v|max=%v|min=%v|range=%d-%d|%s|seed=%d|minneg=%d|%s|grouped=%v|type=%s",
		src.Name(), retr, m.teacher.Name(), o.Negatives, o.TopK, o.Margin, o.AbsMargin, o.MaxScore, o.MinScore,
		o.RangeMin, o.RangeMax, o.Sampling, o.Seed, o.MinNegatives, o.Format, o.Grouped, o.Type)
	if o.RequireTop > 0 { // absent otherwise, so earlier runs still resume
		key += fmt.Sprintf("|requiretop=%d", o.RequireTop)
	}
	return key
}

// progressPath is the sidecar that records how far out is complete.
func progressPath(out string) string { return out + ".progress" }

// ProgressPath is exported for tools and tests that inspect a run.
func ProgressPath(out string) string { return progressPath(out) }
