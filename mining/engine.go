package mining

import (
	"context"
	"fmt"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/safe"
)

// EngineRetriever takes candidates from an engine's search pipeline.
type EngineRetriever struct {
	E    *engine.Engine
	Mode engine.Mode // lexical, dense, hybrid (default) or rerank
	// Depth is how many candidates each list contributes before fusion
	// (default max(100, k)).
	Depth int
}

// Name identifies the pipeline in the resume check.
func (r *EngineRetriever) Name() string {
	if r.Mode == "" {
		return "engine:" + string(engine.ModeHybrid)
	}
	return "engine:" + string(r.Mode)
}

func (r *EngineRetriever) Retrieve(ctx context.Context, q Query, k int) ([]Candidate, error) {
	ctx = safe.Ctx(ctx)
	mode := r.Mode
	if mode == "" {
		mode = engine.ModeHybrid
	}
	p := Prompt(q)
	ep := engine.Prompt{Instruction: p.Instruction}
	for _, ex := range p.Examples {
		ep.Examples = append(ep.Examples, engine.Example{Query: ex.Query, Response: ex.Response})
	}
	// Candidates come from BM25 and dense fused by RRF, as paper 003's
	// pipeline does, whatever fusion the index chose for its searches: a
	// mined file does not change with that choice.
	res, err := r.E.Search(ctx, q.Text, engine.SearchOptions{Mode: mode, K: k, Depth: max(r.Depth, k), Prompt: ep, Fusion: engine.FusionRRF})
	if err != nil {
		return nil, err
	}
	out := make([]Candidate, len(res))
	for i, h := range res {
		out[i] = Candidate{ID: h.ID, Text: engine.EmbedText(engine.Document{Title: h.Title, Text: h.Text}), Score: h.Score, Rank: i}
		if h.Title != "" {
			out[i].Body = h.Text
		}
	}
	return out, nil
}

// EngineCorpus resolves IDs to the text the engine embeds for them (title
// and text joined), the same text candidates carry.
type EngineCorpus struct{ E *engine.Engine }

func (c EngineCorpus) Text(ctx context.Context, id string) (string, bool, error) {
	ctx = safe.Ctx(ctx)
	if id == "" {
		return "", false, nil // no document has it (Get refuses it with ErrEmptyID)
	}
	docs, err := c.E.Get(ctx, id)
	if err != nil || len(docs) == 0 {
		return "", false, err
	}
	return engine.EmbedText(docs[0]), true, nil
}

// StoredVectors looks document vectors up in the engine's store, for a
// DenseTeacher using the engine's own model.
func StoredVectors(e *engine.Engine) VectorLookup {
	return func(ctx context.Context, id string) ([][]float32, bool, error) {
		v, ok, err := e.Teacher().Vectors(id)
		if err != nil {
			return nil, false, fmt.Errorf("read vector: %w", err)
		}
		return v, ok, nil
	}
}

// EngineLexical is a teacher signal: the engine's BM25 score of any
// (query, document) pair (engine.LexicalScores). A document with an ID the
// engine holds is scored with its stored title and text; any other as text
// alone. The query is scored without its instruction.
type EngineLexical struct{ E *engine.Engine }

func (EngineLexical) Name() string { return "bm25" }

func (t EngineLexical) Score(ctx context.Context, q Query, docs []Doc) ([]float64, error) {
	ctx = safe.Ctx(ctx)
	var ids []string
	for _, d := range docs {
		if d.ID != "" {
			ids = append(ids, d.ID)
		}
	}
	stored := map[string]engine.Document{}
	if len(ids) > 0 {
		got, err := t.E.Get(ctx, ids...)
		if err != nil {
			return nil, err
		}
		for _, d := range got {
			stored[d.ID] = d
		}
	}
	in := make([]engine.Document, len(docs))
	for i, d := range docs {
		if s, ok := stored[d.ID]; ok && d.ID != "" {
			// The ID too: a Weaviate backend scores stored documents by ID.
			in[i] = engine.Document{ID: s.ID, Title: s.Title, Text: s.Text}
		} else {
			in[i] = engine.Document{Text: d.Text}
		}
	}
	return t.E.Teacher().LexicalScores(ctx, q.Text, in)
}

// Pipeline is mine-negatives' candidate retriever: eng's search in mode
// alone (hybrid when ""), or, with other models' indexes of the same
// corpus, the RRF of eng's lists (lexical unless mode is dense, dense
// unless it is lexical) and each other index's dense list.
func Pipeline(eng *engine.Engine, mode engine.Mode, others ...*engine.Engine) Retriever {
	if len(others) == 0 {
		return &EngineRetriever{E: eng, Mode: mode}
	}
	var lists []Retriever
	if mode != engine.ModeDense {
		lists = append(lists, &EngineRetriever{E: eng, Mode: engine.ModeLexical})
	}
	if mode != engine.ModeLexical {
		lists = append(lists, &EngineRetriever{E: eng, Mode: engine.ModeDense})
	}
	for _, o := range others {
		lists = append(lists, &EngineRetriever{E: o, Mode: engine.ModeDense})
	}
	return &FusedRetriever{Lists: lists}
}
