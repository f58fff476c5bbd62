package train

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
)

// Example is one line of the miner's output in FlagEmbedding's format:
// {"query", "pos": [...], "neg": [...], "pos_scores", "neg_scores", "prompt"}.
type Example struct {
	Query     string    `json:"query"`
	Pos       []string  `json:"pos"`
	Neg       []string  `json:"neg"`
	PosScores []float64 `json:"pos_scores"`
	NegScores []float64 `json:"neg_scores"`
	Prompt    string    `json:"prompt"`
	line      int
}

// ReadExamples reads a FlagEmbedding JSON-lines file. Every line needs a
// query, at least one positive and at least one negative; when needScores,
// pos_scores and neg_scores must match pos and neg in length. Errors name
// the file, line and field.
func ReadExamples(path string, needScores bool) ([]Example, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("train: reading training data: %w", err)
	}
	defer f.Close()
	var out []Example
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var e Example
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("train: %s:%d: not a JSON object: %w", path, line, err)
		}
		e.line = line
		switch {
		case e.Query == "":
			return nil, fmt.Errorf("train: %s:%d: field \"query\" is missing or empty", path, line)
		case len(e.Pos) == 0:
			return nil, fmt.Errorf("train: %s:%d: field \"pos\" has no positive passage", path, line)
		case len(e.Neg) == 0:
			return nil, fmt.Errorf("train: %s:%d: field \"neg\" has no negatives (mine hard negatives first: `annactl mine`)", path, line)
		}
		if needScores {
			if len(e.PosScores) != len(e.Pos) || len(e.NegScores) != len(e.Neg) {
				return nil, fmt.Errorf("train: %s:%d: distillation needs teacher scores: \"pos_scores\" has %d for %d positives, \"neg_scores\" %d for %d negatives (mine with a teacher, or train with distillation weight 0)",
					path, line, len(e.PosScores), len(e.Pos), len(e.NegScores), len(e.Neg))
			}
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("train: %s:%d: %w", path, line+1, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("train: %s holds no examples", path)
	}
	return out, nil
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
