package engine

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/anna-search/anna/internal/clip"
)

// Fusion is how several ranked lists become one.
type Fusion string

const (
	// FusionRRF fuses by reciprocal rank, Σ w/(k+rank): ranks only, no
	// scale to match between lists (anna's default before 2026-12-06).
	FusionRRF Fusion = "rrf"
	// FusionMinMax maps each list's scores to [0,1] (its best 1, its worst
	// 0) and sums them, weighted: Weaviate's relativeScoreFusion.
	FusionMinMax Fusion = "minmax"
	// FusionDBSF (the default) maps each list's mean-3σ..mean+3σ to 0..1 and
	// sums them, weighted: Qdrant's distribution-based score fusion.
	FusionDBSF Fusion = "dbsf"
)

// DefaultFusion is how hybrid search fuses where neither
// SearchOptions.Fusion nor the index's recorded choice (SetFusion) says.
// DBSF: a list's scores say how far its best documents stand out, which
// ranks alone do not, and over the shared collections hybrid fused by DBSF
// was at or above its better list where RRF fell below it (SQuAD with the
// default model: BM25 0.9010, RRF 0.8816, DBSF 0.9165;
// docs/results/fusion.md has every set and model).
const DefaultFusion = FusionDBSF

// ParseFusion reads a fusion name ("" is DefaultFusion).
func ParseFusion(s string) (Fusion, error) {
	switch f := Fusion(strings.ToLower(s)); f {
	case "":
		return DefaultFusion, nil
	case FusionRRF, FusionMinMax, FusionDBSF:
		return f, nil
	}
	return "", fmt.Errorf("engine: unknown fusion %s (want rrf, minmax or dbsf)", clip.Quote(s))
}

// stateFusion keeps an index's FusionChoice in anna.db (JSON).
const stateFusion = "search.fusion"

// FusionChoice is an index's own default fusion: what a search whose
// SearchOptions.Fusion is "" fuses with. It holds only while the index
// embeds with the model it was chosen for: a fusion that suits one model's
// scores need not suit another's, so after Reindex to another model the
// index is back on DefaultFusion until a new choice is recorded.
type FusionChoice struct {
	Fusion Fusion
	Model  string // the model fingerprint it was chosen for
	// Why says how it was chosen, in words: annactl eval --choose-fusion
	// writes the dataset, the split and every fusion's nDCG@10.
	Why string
}

// Active reports whether the choice applies to an index embedding with the
// model whose fingerprint is fp.
func (c FusionChoice) Active(fp string) bool { return c.Fusion != "" && c.Model == fp }

// inEffect is what SearchOptions.Fusion "" means for an index embedding with
// the model whose fingerprint is fp: the choice while it is active, else
// DefaultFusion.
func (c FusionChoice) inEffect(fp string) Fusion {
	if c.Active(fp) {
		return c.Fusion
	}
	return DefaultFusion
}

// SetFusion records c as the index's default fusion, for the model the
// index embeds with now (c.Model, when set, must name it). Any fusion named
// is kept, DefaultFusion too (a measured choice outlives a change of the
// default); the zero FusionChoice clears the record. The choice is kept in
// anna.db with the documents: it survives restarts, and Check and Repair
// leave it alone.
func (e *Engine) SetFusion(c FusionChoice) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	if e.opts.ReadOnly {
		return ErrReadOnly
	}
	if e.via != nil {
		// Through the writing process it cannot; once that process has
		// gone, in the directory itself (it returned nil and recorded
		// nothing).
		in, err := e.viaInner("record a fusion")
		if err != nil {
			return err
		}
		return in.SetFusion(c)
	}
	if c.Fusion != "" {
		f, err := ParseFusion(string(c.Fusion))
		if err != nil {
			return optErr("FusionChoice.Fusion", fmt.Sprintf("%q", c.Fusion), "must be rrf, minmax or dbsf")
		}
		c.Fusion = f
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if c.Model == "" {
		c.Model = e.cur.model.Fingerprint
	} else if c.Model != e.cur.model.Fingerprint {
		return optErr("FusionChoice.Model", c.Model, fmt.Sprintf("must be the index's model, %s", e.cur.model.Fingerprint))
	}
	var raw []byte // nil deletes the key
	if c.Fusion != "" {
		var err error
		if raw, err = json.Marshal(c); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	} else {
		c = FusionChoice{}
	}
	if err := e.store.SetState(stateFusion, raw); err != nil {
		return fmt.Errorf("engine: recording the fusion: %w", err)
	}
	e.cur.fusion = c
	return nil
}

// loadFusion reads the recorded FusionChoice (Open). A value that cannot be
// read is a warning, not a failure: the index searches with DefaultFusion.
func (e *Engine) loadFusion() error {
	raw, err := e.store.State(stateFusion)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if raw == nil {
		return nil
	}
	var c FusionChoice
	if err := json.Unmarshal(raw, &c); err != nil {
		e.warn("anna.db: the recorded fusion choice cannot be read (%v): searching with the default fusion (%s) until one is recorded again", err, DefaultFusion)
		return nil
	}
	if _, err := ParseFusion(string(c.Fusion)); err != nil {
		e.warn("anna.db: the recorded fusion %q is unknown: searching with the default fusion (%s) until one is recorded again", c.Fusion, DefaultFusion)
		return nil
	}
	e.cur.fusion = c
	return nil
}

// fusionFor is the fusion a search with opts fuses by: the one opts names
// (NamedFusion), else the index's choice in effect (fusionInEffect).
func (e *Engine) fusionFor(opts SearchOptions) Fusion {
	if f := opts.NamedFusion(); f != "" {
		return f
	}
	return e.fusionInEffect()
}

// fusionInEffect is what SearchOptions.Fusion "" means now.
func (e *Engine) fusionInEffect() Fusion {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.cur.fusion.inEffect(e.cur.model.Fingerprint)
}
