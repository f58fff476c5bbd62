package causal2vec

import "fmt"

// Encoder is the small bidirectional model that pools each text into one
// vector (the paper mean-pools its last hidden state): anna's ORT encoder,
// the trainer's BERT with LoRA, or a fixed table in tests.
type Encoder interface {
	// Encode returns one vector per text (len(texts)×dim, row-major) and
	// its dimension. A trainable encoder keeps what its Backward needs.
	Encode(texts []string) (vecs []float32, dim int, err error)
	// Backward receives the gradient with respect to the last Encode's
	// vectors (same shape), already multiplied by the step's scale, and
	// adds it into the encoder's own parameters. A frozen encoder does
	// nothing.
	Backward(dVecs []float32) error
}

// Frozen makes an Encoder of a function: Encode calls it, Backward does
// nothing. It adapts any forward-only encoder (anna's ORT encoder).
type Frozen func(texts []string) (vecs []float32, dim int, err error)

// Encode calls f.
func (f Frozen) Encode(texts []string) ([]float32, int, error) { return f(texts) }

// Backward does nothing: the encoder is frozen.
func (Frozen) Backward([]float32) error { return nil }

// Table is a frozen Encoder with a fixed vector per text (tests, or
// vectors computed beforehand). A text it lacks is an error.
type Table struct {
	Dim  int
	Vecs map[string][]float32
}

// Encode looks each text up.
func (t *Table) Encode(texts []string) ([]float32, int, error) {
	out := make([]float32, 0, len(texts)*t.Dim)
	for i, s := range texts {
		v, ok := t.Vecs[s]
		switch {
		case !ok:
			return nil, 0, fmt.Errorf("causal2vec: table encoder has no vector for text %d (%.40q)", i, s)
		case len(v) != t.Dim:
			return nil, 0, fmt.Errorf("causal2vec: table encoder's vector for text %d has %d values, want %d", i, len(v), t.Dim)
		}
		out = append(out, v...)
	}
	return out, t.Dim, nil
}

// Backward does nothing: the table is frozen.
func (*Table) Backward([]float32) error { return nil }
