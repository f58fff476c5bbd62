package adapt

import (
	"context"
	"fmt"

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
	t, err := encoder.Load(ctx, r.cfg.TeacherModel, encoder.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("adapt: the teacher model: %w", err)
	}
	c, err := encoder.NewCache(t, "")
	if err != nil {
		t.Close()
		return nil, nil, fmt.Errorf("adapt: the teacher model's cache: %w", err)
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
