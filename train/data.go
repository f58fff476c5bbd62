package train

import (
	"fmt"
	"math/rand/v2"

	"github.com/anna-search/anna/internal/format/flagembedding"
	"github.com/anna-search/anna/model"
)

// Example is one training example: a line of the miner's output in
// FlagEmbedding's format (package flagembedding).
type Example = flagembedding.Record

// ReadExamples reads a FlagEmbedding JSON-lines file. Every line needs a
// query, at least one positive and at least one negative; when needScores,
// pos_scores and neg_scores must match pos and neg in length. Errors name
// the file, line and field.
func ReadExamples(path string, needScores bool) ([]Example, error) {
	ex, err := flagembedding.ReadFile(path, flagembedding.ReadOptions{Negatives: true, Scores: needScores})
	if err != nil {
		return nil, fmt.Errorf("train: reading training data: %w", err)
	}
	return ex, nil
}

// group is what one query contributes to a step: the query text, G
// documents (the positive first) and their teacher scores.
type group struct {
	query   string
	docs    []string
	teacher []float32
}

// sampleGroup picks a positive and G−1 negatives for e. The choice depends
// only on (seed, key), so a resumed run draws the same groups. Negatives are
// drawn without replacement while there are enough, then repeated.
func sampleGroup(e *Example, G int, seed, key uint64) group {
	r := rand.New(rand.NewPCG(seed, key))
	pi := r.IntN(len(e.Pos))
	g := group{query: e.Prompt + e.Query, docs: []string{e.Pos[pi]}}
	if len(e.PosScores) == len(e.Pos) {
		g.teacher = append(g.teacher, float32(e.PosScores[pi]))
	}
	perm := r.Perm(len(e.Neg))
	for k := 0; k < G-1; k++ {
		ni := perm[k%len(perm)]
		g.docs = append(g.docs, e.Neg[ni])
		if g.teacher != nil && len(e.NegScores) == len(e.Neg) {
			g.teacher = append(g.teacher, float32(e.NegScores[ni]))
		}
	}
	if len(g.teacher) != G {
		g.teacher = nil
	}
	return g
}

// servedPrefixes gives a BERT bi-encoder's examples the prefixes the model
// is served with (its sentence-transformers prompts, which its export
// keeps): the query prefix where a line has no prompt of its own (bge's
// "Represent this sentence for searching relevant passages: "), the
// document prefix on every positive and negative, so that training sees
// the texts the encoder will embed.
func servedPrefixes(examples []Example, st model.STSettings) {
	for i := range examples {
		e := &examples[i]
		if e.Prompt == "" {
			e.Prompt = st.QueryPrefix
		}
		if st.DocumentPrefix == "" {
			continue
		}
		for _, docs := range [][]string{e.Pos, e.Neg} {
			for j := range docs {
				docs[j] = st.DocumentPrefix + docs[j]
			}
		}
	}
}
