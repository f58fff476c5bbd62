// Package flagembedding is the FlagEmbedding fine-tuning data format: JSON
// lines, one example each,
//
//	{"query": ..., "pos": [...], "neg": [...], "pos_scores": [...], "neg_scores": [...], "prompt": ..., "type": ..., "teacher": ...}
//
// as FlagEmbedding's trainers read it (they ignore fields they do not
// know; "teacher" is anna's: who scored pos_scores and neg_scores). The
// miner writes Records and the trainer reads them: one record type for the
// format, in a package both import.
package flagembedding

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/anna-search/anna/hint"
)

// Record is one example. The field order is the order written.
type Record struct {
	Query     string    `json:"query"`
	Pos       []string  `json:"pos"`
	Neg       []string  `json:"neg"`
	PosScores []float64 `json:"pos_scores"`
	NegScores []float64 `json:"neg_scores"`
	Prompt    string    `json:"prompt"`
	Type      string    `json:"type"`
	Teacher   string    `json:"teacher"`
}

// ReadOptions say what a reader requires of every record.
type ReadOptions struct {
	// Negatives requires at least one negative (contrastive training).
	Negatives bool
	// Scores requires pos_scores and neg_scores as long as pos and neg
	// (distillation).
	Scores bool
}

// maxLine bounds one JSON line.
const maxLine = 64 << 20

// Read reads records from r (named name in errors). Blank lines are
// skipped. Every record needs a query and a positive, and what opts
// requires; an error names name:line and the field. An input with no
// record is an error.
func Read(r io.Reader, name string, opts ReadOptions) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), maxLine)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("%s:%d: not a FlagEmbedding JSON object: %w", name, line, err)
		}
		switch {
		case rec.Query == "":
			return nil, fmt.Errorf("%s:%d: field \"query\" is missing or empty", name, line)
		case len(rec.Pos) == 0:
			return nil, fmt.Errorf("%s:%d: field \"pos\" has no positive passage", name, line)
		case opts.Negatives && len(rec.Neg) == 0:
			return nil, hint.Errorf(hint.Action{Kind: hint.MineNegatives}, "%s:%d: field \"neg\" has no negatives (mine hard negatives first)", name, line)
		}
		if opts.Scores && (len(rec.PosScores) != len(rec.Pos) || len(rec.NegScores) != len(rec.Neg)) {
			return nil, fmt.Errorf("%s:%d: teacher scores needed: \"pos_scores\" has %d for %d positives, \"neg_scores\" %d for %d negatives (mine with a teacher, or train without distillation)",
				name, line, len(rec.PosScores), len(rec.Pos), len(rec.NegScores), len(rec.Neg))
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no examples", name)
	}
	return out, nil
}

// ReadFile is Read on a file.
func ReadFile(path string, opts ReadOptions) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, path, opts)
}
