package encoder

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model"
)

// Ensemble embeds with several models at once (a manifest of architecture
// model.ArchEnsemble): a text's vector is each part's unit vector of it,
// scaled by √(wᵢ/Σw), joined in the manifest's order. Every vector is
// then of unit length, and the dot product of two is the weighted mean of
// the parts' cosines, Σ wᵢ·cosᵢ / Σ wᵢ: one dense list that ranks by the
// same weighted sum a calibrated fusion teacher gives its dense signals
// (mining.FusionTeacher, whose weights `annactl adapt --serve ensemble`
// writes into one). Each part reads the text with its own prefixes, so
// e5-small-v2 still sees "query: " and "passage: ". It costs each part's
// forward, one after the other.
//
// Long documents are split by the first part's tokenizer (Splitter), into
// windows no part truncates (MaxLength is the least of the parts').
type Ensemble struct {
	parts []*Model
	scale []float32
	man   *model.Manifest
}

var (
	_ Encoder  = (*Ensemble)(nil)
	_ Splitter = (*Ensemble)(nil)
)

// LoadEnsemble opens the ensemble whose manifest is in dir: each part is
// loaded (Load, with opts) from its Path, else from the installed model of
// its Name, and must have the fingerprint and width the manifest records.
func LoadEnsemble(ctx context.Context, dir string, opts Options) (*Ensemble, error) {
	ctx = safe.Ctx(ctx)
	man, err := model.LoadManifest(dir)
	if err != nil {
		return nil, err
	}
	if man.Ensemble == nil {
		return nil, fmt.Errorf("encoder: %s is a %s model, not an ensemble", dir, man.Architecture)
	}
	return loadEnsemble(ctx, dir, man, opts)
}

// loadEnsemble is LoadEnsemble with dir's manifest read.
func loadEnsemble(ctx context.Context, dir string, man *model.Manifest, opts Options) (_ *Ensemble, err error) {
	defer safe.Recover(&err)
	e := &Ensemble{man: man}
	var total float64
	for _, p := range man.Ensemble.Parts {
		total += p.Weight
	}
	for _, p := range man.Ensemble.Parts {
		m, err := loadNamed(ctx, p.Path, p.Name, p.Fingerprint, p.Dim, opts)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("encoder: ensemble %s joins %s (install it, or keep it at %s): %w", dir, p.Name, p.Path, err)
		}
		e.parts = append(e.parts, m)
		e.scale = append(e.scale, float32(math.Sqrt(p.Weight/total)))
	}
	return e, nil
}

// Dim is the sum of the parts' widths.
func (e *Ensemble) Dim() int { return e.man.Dim }

// Fingerprint is the manifest's: the parts' fingerprints and weights.
func (e *Ensemble) Fingerprint() string { return e.man.Fingerprint }

// Manifest returns the ensemble's manifest (do not modify it).
func (e *Ensemble) Manifest() *model.Manifest { return e.man }

// Parts are the models the ensemble joins, in order.
func (e *Ensemble) Parts() []*Model { return e.parts }

// MaxLength is the least of the parts' token limits.
func (e *Ensemble) MaxLength() int {
	n := e.man.MaxLength
	for _, p := range e.parts {
		n = min(n, p.MaxLength())
	}
	return n
}

// Split cuts text with the first part's tokenizer (Model.Split).
func (e *Ensemble) Split(prefix, text string, window, stride int) []Passage {
	return e.parts[0].Split(prefix, text, window, stride)
}

// EmbedDocuments embeds texts as documents with every part, in input order.
func (e *Ensemble) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	ctx = safe.Ctx(ctx)
	return e.join(ctx, len(texts), func(m *Model) ([][]float32, error) { return m.EmbedDocuments(ctx, texts) })
}

// EmbedQueries embeds queries with every part, each formatting them with
// p and its own query prefix, in input order.
func (e *Ensemble) EmbedQueries(ctx context.Context, queries []string, p Prompt) ([][]float32, error) {
	ctx = safe.Ctx(ctx)
	return e.join(ctx, len(queries), func(m *Model) ([][]float32, error) { return m.EmbedQueries(ctx, queries, p) })
}

// join runs embed on every part and joins each text's scaled unit vectors.
func (e *Ensemble) join(ctx context.Context, n int, embed func(*Model) ([][]float32, error)) ([][]float32, error) {
	ctx = safe.Ctx(ctx)
	dim := e.Dim()
	buf := make([]float32, n*dim)
	out := make([][]float32, n)
	for i := range out {
		out[i] = buf[i*dim : (i+1)*dim : (i+1)*dim]
	}
	off := 0
	for j, m := range e.parts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		vecs, err := embed(m)
		if err != nil {
			return nil, fmt.Errorf("ensemble part %s: %w", e.man.Ensemble.Parts[j].Name, err)
		}
		if len(vecs) != n {
			return nil, fmt.Errorf("ensemble part %s: %d vectors for %d texts", e.man.Ensemble.Parts[j].Name, len(vecs), n)
		}
		d := m.Dim()
		for i, v := range vecs {
			w := out[i][off : off+d]
			copy(w, v)
			normalize(w)
			for k := range w {
				w[k] *= e.scale[j]
			}
		}
		off += d
	}
	return out, nil
}

// Close closes every part.
func (e *Ensemble) Close() error {
	var errs []error
	for _, p := range e.parts {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// ensembleLanguages are the languages an ensemble reads, its parts'
// (model.Manifest.ModelLanguages) joined: a language any part was trained on
// (the calibrated weights already say how much each part counts), "*" when
// a part reads every language, nil (unknown, taken as any) when a part's
// are unknown.
func ensembleLanguages(parts [][]string) []string {
	var out []string
	for _, l := range parts {
		if len(l) == 0 {
			return nil
		}
		if slices.Contains(l, "*") {
			return []string{"*"}
		}
		for _, x := range l {
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	slices.Sort(out)
	return out
}

// NewEnsemble is the manifest of an ensemble named name joining parts,
// each given by Name (an installed model) or Path (a model directory)
// and Weight: it reads each part's manifest for its fingerprint, width,
// token limit and languages. Write it into a directory of its own with
// model.WriteManifest; Open then embeds with it.
func NewEnsemble(name string, parts []model.EnsemblePart) (*model.Manifest, error) {
	if len(parts) == 0 {
		return nil, errors.New("encoder: an ensemble needs at least one part")
	}
	man := &model.Manifest{Name: name, Architecture: model.ArchEnsemble, Task: model.TaskEmbed, Normalize: true,
		Ensemble: &model.Ensemble{}, Files: map[string]string{}}
	var langs [][]string
	for i, p := range parts {
		dir := p.Path
		if dir == "" {
			dir = filepath.Join(home.ModelsDir(), p.Name)
		}
		pm, err := model.LoadManifest(dir)
		if err != nil {
			return nil, fmt.Errorf("encoder: ensemble part %d (%s): %w", i, p.Name, err)
		}
		if pm.Task != model.TaskEmbed || pm.Ensemble != nil {
			return nil, fmt.Errorf("encoder: ensemble part %d (%s): %s is not an embedding model", i, p.Name, dir)
		}
		if p.Name == "" {
			p.Name = pm.Name
		}
		p.Fingerprint, p.Dim = pm.Fingerprint, pm.Dim
		man.Ensemble.Parts = append(man.Ensemble.Parts, p)
		man.Dim += pm.Dim
		if i == 0 || pm.MaxLength < man.MaxLength {
			man.MaxLength = pm.MaxLength
		}
		langs = append(langs, pm.ModelLanguages())
	}
	man.Languages = ensembleLanguages(langs)
	man.Fingerprint = model.EnsembleFingerprint(man.Ensemble.Parts)
	if err := man.Validate(); err != nil {
		return nil, fmt.Errorf("encoder: %w", err)
	}
	return man, nil
}
