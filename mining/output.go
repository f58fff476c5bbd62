package mining

import (
	"encoding/json"
	"fmt"

	"github.com/anna-search/anna/internal/format/flagembedding"
)

type tripletRecord struct {
	Anchor   string `json:"anchor"`
	Doc      string `json:"positive"`
	Negative string `json:"negative"`
}

type labeledListRecord struct {
	Query  string   `json:"query"`
	Answer []string `json:"answer"`
	Labels []int    `json:"labels"`
}

// encode writes one example and returns the number of lines written.
func (m *Miner) encode(enc *json.Encoder, q Query, pos []string, posScores []float64, negs []scored) (int, error) {
	switch m.opt.Format {
	case FormatFlag:
		r := flagembedding.Record{Query: q.Text, Pos: pos, PosScores: posScores, Prompt: q.Instruction, Type: m.opt.Type, Teacher: m.teacher.Name(),
			Neg: make([]string, len(negs)), NegScores: make([]float64, len(negs))}
		for i, n := range negs {
			r.Neg[i], r.NegScores[i] = n.Text, n.Teacher
		}
		return 1, enc.Encode(r)
	case FormatTriplet:
		lines := 0
		for _, p := range pos {
			for _, n := range negs {
				if err := enc.Encode(tripletRecord{q.Text, p, n.Text}); err != nil {
					return lines, err
				}
				lines++
			}
		}
		return lines, nil
	case FormatNTuple:
		// Column order matters to sentence-transformers: anchor, positive,
		// negative_1..n. A map would sort keys, so build the object by hand.
		lines := 0
		for _, p := range pos {
			b := []byte(`{"anchor":`)
			b = appendJSON(b, q.Text)
			b = append(b, `,"positive":`...)
			b = appendJSON(b, p)
			for i, n := range negs {
				b = append(b, fmt.Sprintf(`,"negative_%d":`, i+1)...)
				b = appendJSON(b, n.Text)
			}
			b = append(b, "}"...)
			var raw json.RawMessage = b
			if err := enc.Encode(raw); err != nil {
				return lines, err
			}
			lines++
		}
		return lines, nil
	case FormatLabeledList:
		r := labeledListRecord{Query: q.Text}
		for _, p := range pos {
			r.Answer = append(r.Answer, p)
			r.Labels = append(r.Labels, 1)
		}
		for _, n := range negs {
			r.Answer = append(r.Answer, n.Text)
			r.Labels = append(r.Labels, 0)
		}
		return 1, enc.Encode(r)
	}
	return 0, fmt.Errorf("unknown format %q", m.opt.Format)
}

func appendJSON(b []byte, s string) []byte {
	j, _ := json.Marshal(s) // strings always marshal
	return append(b, j...)
}
