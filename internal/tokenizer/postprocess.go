package tokenizer

import (
	"encoding/json"
	"fmt"
)

// template is every supported post-processor reduced to one form: a list of
// pieces for single sequences and one for pairs. Hugging Face's
// BertProcessing and RobertaProcessing are special cases of
// TemplateProcessing, so they are converted on load.
type template struct {
	single, pair []piece
	// Added special tokens per form; truncation budgets subtract these, as
	// Hugging Face's post_process does.
	addedSingle, addedPair int
}

// piece is either a special token (seq < 0; ids, usually one) or one of
// the input sequences (seq 0 = A, 1 = B); typeID overrides the sequence's.
type piece struct {
	seq    int
	ids    []int64
	typeID int64
}

// noTemplate is what Hugging Face does without a post-processor (or with
// ByteLevel only): sequences are concatenated, B gets type id 1.
func noTemplate() *template {
	return newTemplate(
		[]piece{{seq: 0, typeID: 0}},
		[]piece{{seq: 0, typeID: 0}, {seq: 1, typeID: 1}},
	)
}

func newTemplate(single, pair []piece) *template {
	t := &template{single: single, pair: pair}
	t.addedSingle = countSpecial(single)
	t.addedPair = countSpecial(pair)
	return t
}

func countSpecial(ps []piece) int {
	n := 0
	for _, p := range ps {
		if p.seq < 0 {
			n += len(p.ids)
		}
	}
	return n
}

// parsePostProcessor reads the tokenizer.json "post_processor" field.
func parsePostProcessor(raw json.RawMessage) (*template, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return noTemplate(), nil
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	switch head.Type {
	case "TemplateProcessing":
		return parseTemplate(raw)
	case "BertProcessing", "RobertaProcessing":
		var v struct {
			Sep [2]json.RawMessage `json:"sep"`
			Cls [2]json.RawMessage `json:"cls"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("post_processor %s: %w", head.Type, err)
		}
		var sep, cls int64
		if err := json.Unmarshal(v.Sep[1], &sep); err != nil {
			return nil, fmt.Errorf("post_processor %s: sep id: %w", head.Type, err)
		}
		if err := json.Unmarshal(v.Cls[1], &cls); err != nil {
			return nil, fmt.Errorf("post_processor %s: cls id: %w", head.Type, err)
		}
		s := func(id, typ int64) piece { return piece{seq: -1, ids: []int64{id}, typeID: typ} }
		single := []piece{s(cls, 0), {seq: 0, typeID: 0}, s(sep, 0)}
		if head.Type == "BertProcessing" {
			// [CLS] A [SEP] B [SEP], B and its [SEP] with type id 1.
			return newTemplate(single, []piece{s(cls, 0), {seq: 0, typeID: 0}, s(sep, 0), {seq: 1, typeID: 1}, s(sep, 1)}), nil
		}
		// <s> A </s> </s> B </s>; RoBERTa resets every type id to 0.
		return newTemplate(single, []piece{s(cls, 0), {seq: 0, typeID: 0}, s(sep, 0), s(sep, 0), {seq: 1, typeID: 0}, s(sep, 0)}), nil
	case "ByteLevel":
		// Only trims offsets; ids and type ids are untouched.
		return noTemplate(), nil
	case "Sequence":
		var v struct {
			Processors []json.RawMessage `json:"processors"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("post_processor Sequence: %w", err)
		}
		// Supported when at most one member adds tokens (the usual
		// ByteLevel + TemplateProcessing); chaining two would need the
		// encodings-level semantics we do not reproduce.
		var found *template
		for i, p := range v.Processors {
			t, err := parsePostProcessor(p)
			if err != nil {
				return nil, fmt.Errorf("post_processor Sequence[%d]: %w", i, err)
			}
			if t.addedSingle == 0 && t.addedPair == 0 && isPlain(t) {
				continue
			}
			if found != nil {
				return nil, fmt.Errorf("post_processor Sequence: more than one processor adds special tokens; not supported")
			}
			found = t
		}
		if found == nil {
			return noTemplate(), nil
		}
		return found, nil
	default:
		return nil, fmt.Errorf("post_processor type %q not supported (want TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel or Sequence of them)", head.Type)
	}
}

// isPlain reports whether t is exactly noTemplate.
func isPlain(t *template) bool {
	p := noTemplate()
	if len(t.single) != len(p.single) || len(t.pair) != len(p.pair) {
		return false
	}
	for i := range p.single {
		if t.single[i].seq != p.single[i].seq || t.single[i].typeID != p.single[i].typeID {
			return false
		}
	}
	for i := range p.pair {
		if t.pair[i].seq != p.pair[i].seq || t.pair[i].typeID != p.pair[i].typeID {
			return false
		}
	}
	return true
}

func parseTemplate(raw json.RawMessage) (*template, error) {
	type specialRef struct {
		ID     string `json:"id"`
		TypeID int64  `json:"type_id"`
	}
	type item struct {
		SpecialToken *specialRef `json:"SpecialToken"`
		Sequence     *specialRef `json:"Sequence"`
	}
	var v struct {
		Single        []item `json:"single"`
		Pair          []item `json:"pair"`
		SpecialTokens map[string]struct {
			ID  string  `json:"id"`
			IDs []int64 `json:"ids"`
		} `json:"special_tokens"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("post_processor TemplateProcessing: %w", err)
	}
	convert := func(name string, items []item) ([]piece, error) {
		out := make([]piece, 0, len(items))
		for i, it := range items {
			switch {
			case it.SpecialToken != nil:
				st, ok := v.SpecialTokens[it.SpecialToken.ID]
				if !ok {
					return nil, fmt.Errorf("post_processor TemplateProcessing %s[%d]: special token %q missing from special_tokens", name, i, it.SpecialToken.ID)
				}
				out = append(out, piece{seq: -1, ids: st.IDs, typeID: it.SpecialToken.TypeID})
			case it.Sequence != nil:
				switch it.Sequence.ID {
				case "A":
					out = append(out, piece{seq: 0, typeID: it.Sequence.TypeID})
				case "B":
					if name == "single" {
						return nil, fmt.Errorf("post_processor TemplateProcessing single[%d]: sequence B in the single template", i)
					}
					out = append(out, piece{seq: 1, typeID: it.Sequence.TypeID})
				default:
					return nil, fmt.Errorf("post_processor TemplateProcessing %s[%d]: unknown sequence %q", name, i, it.Sequence.ID)
				}
			default:
				return nil, fmt.Errorf("post_processor TemplateProcessing %s[%d]: neither SpecialToken nor Sequence", name, i)
			}
		}
		return out, nil
	}
	single, err := convert("single", v.Single)
	if err != nil {
		return nil, err
	}
	pair, err := convert("pair", v.Pair)
	if err != nil {
		return nil, err
	}
	return newTemplate(single, pair), nil
}

// apply truncates a (and b when pair) to fit maxLen together with the
// template's special tokens, then lays out the template. Truncation is
// Hugging Face's longest-first from the right, with the budget reduced by the
// special tokens first (tokenizers' post_process). When maxLen cannot even
// hold the special tokens, the sequences are emptied and the special tokens
// kept, so the result is longer than maxLen. (There tokenizers 0.20 differs
// on purpose: its usize subtraction wraps and it skips truncation entirely.)
func (t *template) apply(a, b []int64, pair bool, maxLen int) Encoding {
	pieces, added := t.single, t.addedSingle
	if pair {
		pieces, added = t.pair, t.addedPair
	}
	if maxLen > 0 {
		budget := max(maxLen-added, 0)
		if pair {
			n1, n2 := longestFirst(len(a), len(b), budget)
			a, b = a[:n1], b[:n2]
		} else if len(a) > budget {
			a = a[:budget]
		}
	}
	n := added
	for _, p := range pieces {
		switch p.seq {
		case 0:
			n += len(a)
		case 1:
			n += len(b)
		}
	}
	e := Encoding{IDs: make([]int64, 0, n), TypeIDs: make([]int64, 0, n), Mask: make([]int64, n)}
	for _, p := range pieces {
		ids := p.ids
		switch p.seq {
		case 0:
			ids = a
		case 1:
			ids = b
		}
		e.IDs = append(e.IDs, ids...)
		for range ids {
			e.TypeIDs = append(e.TypeIDs, p.typeID)
		}
	}
	for i := range e.Mask {
		e.Mask[i] = 1
	}
	return e
}

// longestFirst returns the lengths the two sequences keep under budget,
// exactly as tokenizers' truncate_encodings (LongestFirst, pair) computes
// them: the shorter one is kept whole when it can be, and when both must be
// cut the budget is halved, the odd token going to the originally longer
// sequence (to B on a tie).
func longestFirst(la, lb, budget int) (int, int) {
	if la+lb <= budget {
		return la, lb
	}
	n1, n2 := la, lb
	swap := false
	if n1 > n2 {
		swap = true
		n1, n2 = n2, n1
	}
	if n1 > budget {
		n2 = n1
	} else {
		n2 = max(n1, budget-n1)
	}
	if n1+n2 > budget {
		n1 = budget / 2
		n2 = n1 + budget%2
	}
	if swap {
		n1, n2 = n2, n1
	}
	return min(n1, la), min(n2, lb)
}
