package adapt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
)

// teacherBatch is how many documents the teacher model embeds between
// progress reports (and cache writes).
const teacherBatch = 64

// teacherEncoder loads Config.TeacherModel behind the shared embedding
// cache ($ANNA_HOME/cache/embeddings) and embeds every document of the
// index with it, once per mining stage, with progress ("teacher
// documents"). The miners' DenseTeacher (one miner per query file) then
// finds each candidate's vector in the cache: without the pass it embedded
// the 50 candidates of every query afresh (a run of 5,000 queries, 250,000
// texts with a model slower than the student). A rerun after Ctrl-C, or a
// later adapt of the same corpus with the same teacher, embeds only what
// the cache lacks. It returns the cached encoder and the model, which the
// caller closes.
func (r *run) teacherEncoder(ctx context.Context, eng *engine.Engine) (encoder.Encoder, *encoder.ORTEncoder, error) {
	c, t, err := r.cachedTeacher(ctx)
	if err != nil {
		return nil, nil, err
	}
	ids, err := eng.IDs(ctx)
	if err != nil {
		t.Close()
		return nil, nil, fmt.Errorf("adapt: %w", err)
	}
	r.logf("the teacher model (%s) embeds the %d documents once (cached in %s)", t.Manifest().Name, len(ids), c.Path())
	for lo := 0; lo < len(ids); lo += teacherBatch {
		hi := min(lo+teacherBatch, len(ids))
		docs, err := eng.Get(ctx, ids[lo:hi]...)
		if err == nil {
			texts := make([]string, len(docs))
			for i, d := range docs {
				texts[i] = engine.EmbedText(d)
			}
			_, err = c.EmbedDocuments(ctx, texts)
		}
		if err != nil {
			t.Close()
			return nil, nil, fmt.Errorf("adapt: the teacher model embedding the documents: %w", err)
		}
		r.report("teacher documents", hi, len(ids))
	}
	return c, t, nil
}

// cachedTeacher loads Config.TeacherModel behind the shared embedding
// cache, without a pass over the documents: the check reads each
// document's vector once, through the cache the mine stage filled.
func (r *run) cachedTeacher(ctx context.Context) (*encoder.Cache, *encoder.ORTEncoder, error) {
	t, err := encoder.Load(ctx, r.cfg.TeacherModel, encoder.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("adapt: the teacher model: %w", err)
	}
	c, err := encoder.NewCache(t, "")
	if err != nil {
		t.Close()
		return nil, nil, fmt.Errorf("adapt: the teacher model's cache: %w", err)
	}
	return c, t, nil
}

// DefaultTeacher is the teacher model `annactl adapt` uses unless told
// otherwise: the strongest catalogue encoder anna installs, whose cosine
// joins the teacher and whose whole-corpus retrieval the check compares
// with (CheckCorpus).
const DefaultTeacher = "bge-small-en-v1.5"

// DefaultTeacherModel is DefaultTeacher's directory under modelsDir when
// it is installed there and the index's model is not a form of it (a
// model does not teach itself), else "" and why.
func DefaultTeacherModel(index, modelsDir string) (dir, why string) {
	dir = filepath.Join(modelsDir, DefaultTeacher)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Sprintf("%s is not installed (annactl models add %s)", DefaultTeacher, DefaultTeacher)
	}
	if m, err := engine.RecordedModel(index); err == nil && strings.HasPrefix(m.Name, DefaultTeacher) {
		return "", fmt.Sprintf("the index's model is %s", m.Name)
	}
	return dir, ""
}
