package adapt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/lang"
	"github.com/anna-search/anna/mining"
	annamodel "github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
)

// teacherBatch is how many documents the teacher models embed between
// progress reports (and cache writes).
const teacherBatch = 64

// teacherModel is one of Config.TeacherModels, loaded behind the shared
// embedding cache ($ANNA_HOME/cache/embeddings).
type teacherModel struct {
	enc  *encoder.Cache
	m    *encoder.Model
	name string // the model's manifest name
}

// closeTeachers closes what cachedTeachers loaded.
func closeTeachers(ts []teacherModel) {
	for _, t := range ts {
		t.m.Close()
	}
}

// teacherEncoders loads every Config.TeacherModels model behind the shared
// embedding cache and embeds every document of the index with each, once
// per mining stage, with progress ("teacher documents"). The miners'
// DenseTeachers (one miner per query file) then find each candidate's
// vector in the cache: without the pass they embedded the 50 candidates of
// every query afresh (a run of 5,000 queries, 250,000 texts with a model
// slower than the student). A rerun after Ctrl-C, or a later adapt of the
// same corpus with the same teachers, embeds only what the cache lacks.
// The caller closes them (closeTeachers).
func (r *run) teacherEncoders(ctx context.Context, eng *engine.Engine) ([]teacherModel, error) {
	ts, err := r.cachedTeachers(ctx)
	if err != nil {
		return nil, err
	}
	ids, err := eng.Teacher().IDs(ctx)
	if err != nil {
		closeTeachers(ts)
		return nil, fmt.Errorf("adapt: %w", err)
	}
	for k, t := range ts {
		r.logf("teacher model %d of %d (%s) embeds the %d documents once (cached in %s)", k+1, len(ts), t.name, len(ids), t.enc.Path())
		for lo := 0; lo < len(ids); lo += teacherBatch {
			hi := min(lo+teacherBatch, len(ids))
			docs, err := eng.Get(ctx, ids[lo:hi]...)
			if err == nil {
				texts := make([]string, len(docs))
				for i, d := range docs {
					texts[i] = engine.EmbedText(d)
				}
				_, err = t.enc.EmbedDocuments(ctx, texts)
			}
			if err != nil {
				closeTeachers(ts)
				return nil, fmt.Errorf("adapt: the teacher model %s embedding the documents: %w", t.name, err)
			}
			r.report("teacher documents ("+t.name+")", hi, len(ids))
		}
	}
	return ts, nil
}

// denseSignals are the teacher models' cosines as the fusion teacher's
// signals, labelled "dense:NAME" (the names teacher.json records).
func denseSignals(ts []teacherModel) []mining.Teacher {
	var out []mining.Teacher
	for _, t := range ts {
		out = append(out, &mining.DenseTeacher{Enc: t.enc, Label: "dense:" + t.name})
	}
	return out
}

// cachedTeachers loads Config.TeacherModels behind the shared embedding
// cache, without a pass over the documents: the check reads each
// document's vector once, through the cache the mine stage filled.
func (r *run) cachedTeachers(ctx context.Context) ([]teacherModel, error) {
	var ts []teacherModel
	for _, dir := range r.cfg.TeacherModels {
		t, err := encoder.Load(ctx, dir, encoder.Options{})
		if err != nil {
			closeTeachers(ts)
			return nil, fmt.Errorf("adapt: the teacher model %s: %w", dir, err)
		}
		c, err := encoder.NewCache(t, "")
		if err != nil {
			t.Close()
			closeTeachers(ts)
			return nil, fmt.Errorf("adapt: the teacher model %s's cache: %w", dir, err)
		}
		ts = append(ts, teacherModel{enc: c, m: t, name: t.Manifest().Name})
	}
	return ts, nil
}

// DefaultTeacher is the teacher model `annactl adapt` used alone before
// every installed catalogue model joined (DefaultTeacherModels); it is
// still the first of them where installed.
const DefaultTeacher = "bge-small-en-v1.5"

// DefaultTeacherModels are the teacher models `annactl adapt` uses unless
// told otherwise: every embedding model of the catalogue installed under
// modelsDir (its float32 form, else its int8 one) that is not a form of
// the index's model (a model does not teach itself) and was trained on the
// language most of the index's documents are in (corpusLanguage). A model
// of every language (multilingual-e5-small) joins only where none of the
// others knows that language: on English documents the English models are
// the stronger teachers, and each teacher costs a pass over the corpus.
// left says, for people, each installed model left out and why.
func DefaultTeacherModels(ctx context.Context, index, modelsDir string) (dirs, left []string, err error) {
	ctx = safe.Ctx(ctx)
	m, err := engine.RecordedModel(index)
	if err != nil {
		return nil, nil, fmt.Errorf("adapt: %w", err)
	}
	code, err := corpusLanguage(ctx, index)
	if err != nil {
		return nil, nil, err
	}
	dirs, left = TeacherModelsFor(m.Name, code, modelsDir)
	return dirs, left, nil
}

// TeacherModelsFor is DefaultTeacherModels for a student model named
// model (its forms are left out; "" for none) and documents in the
// language code.
func TeacherModelsFor(model, code, modelsDir string) (dirs, left []string) {
	var multi, multiNames []string
	for _, e := range catalog.Entries() {
		if e.Decoder {
			continue
		}
		dir := ""
		for _, name := range []string{e.Name, e.Name + "-int8"} {
			if fi, err := os.Stat(filepath.Join(modelsDir, name)); err == nil && fi.IsDir() {
				dir = filepath.Join(modelsDir, name)
				break
			}
		}
		switch {
		case dir == "":
			continue
		case model != "" && (model == e.Name || strings.HasPrefix(model, e.Name+"-")):
			left = append(left, fmt.Sprintf("%s (the index's model)", e.Name))
			continue
		}
		man := &annamodel.Manifest{Name: e.Name}
		if !man.KnowsLanguage(code) {
			left = append(left, fmt.Sprintf("%s (not trained on %s, the documents' language)", e.Name, code))
			continue
		}
		if langs := man.ModelLanguages(); len(langs) == 1 && langs[0] == "*" {
			multi, multiNames = append(multi, dir), append(multiNames, e.Name)
			continue
		}
		dirs = append(dirs, dir)
	}
	if len(dirs) == 0 {
		return multi, left
	}
	for _, n := range multiNames {
		left = append(left, fmt.Sprintf("%s (the documents are in %s, which the other teachers were trained on)", n, code))
	}
	return dirs, left
}

// languageSample is how many documents corpusLanguage reads.
const languageSample = 400

// corpusLanguage is the language most of the index's documents are in: of
// up to languageSample documents spread over the index, each one's given
// language, else the detector's sure guess (lang.GuessText), the
// commonest; English when under a quarter of them are known (an index made
// before languages were recorded holds English).
func corpusLanguage(ctx context.Context, index string) (string, error) {
	eng, err := engine.Open(ctx, index, engine.Options{ReadOnly: true})
	if err != nil {
		return "", fmt.Errorf("adapt: %w", err)
	}
	defer eng.Close()
	ids, err := eng.Teacher().IDs(ctx)
	if err != nil {
		return "", fmt.Errorf("adapt: %w", err)
	}
	step := max(1, len(ids)/languageSample)
	var sample []string
	for i := 0; i < len(ids); i += step {
		sample = append(sample, ids[i])
	}
	docs, err := eng.Get(ctx, sample...)
	if err != nil {
		return "", fmt.Errorf("adapt: %w", err)
	}
	count := map[string]int{}
	for _, d := range docs {
		code := d.Language
		if code == "" {
			if g := lang.GuessText(engine.EmbedText(d)); g.Sure {
				code = g.Code
			}
		}
		if code != "" {
			count[code]++
		}
	}
	best, sure := lang.English, 0
	for code, n := range count {
		sure += n
		if n > count[best] || (n == count[best] && code < best) {
			best = code
		}
	}
	if 4*sure < len(docs) {
		// Too few documents are surely in any language (short or technical
		// text): a few misread ones must not decide.
		return lang.English, nil
	}
	return best, nil
}
