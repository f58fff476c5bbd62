package flagembedding

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzRead: the FlagEmbedding reader on any input, with and without the
// negatives and scores training wants: it fails naming the input and a
// line, or returns records meeting what was asked, which written back as
// JSON lines read back the same.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"query": "q", "pos": ["p"], "neg": ["n1", "n2"], "pos_scores": [0.9], "neg_scores": [0.1, 0.2], "prompt": "Represent: ", "type": "normal"}`+"\n"), byte(3))
	f.Add([]byte("{\"query\": \"q\", \"pos\": [\"p\"]}\n\n{\"query\": \"r\", \"pos\": [\"s\"], \"neg\": []}\n"), byte(0))
	f.Add([]byte(`{"query": "", "pos": []}`), byte(1))
	f.Fuzz(func(t *testing.T, data []byte, flags byte) {
		opts := ReadOptions{Negatives: flags&1 != 0, Scores: flags&2 != 0}
		recs, err := Read(bytes.NewReader(data), "train.jsonl", opts)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "train.jsonl") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		var out bytes.Buffer
		for _, r := range recs {
			switch {
			case r.Query == "" || len(r.Pos) == 0:
				t.Fatalf("a record without a query or a positive: %+v", r)
			case opts.Negatives && len(r.Neg) == 0:
				t.Fatalf("negatives asked, a record without: %+v", r)
			case opts.Scores && (len(r.PosScores) != len(r.Pos) || len(r.NegScores) != len(r.Neg)):
				t.Fatalf("scores asked, a record without them: %+v", r)
			}
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("%+v: %v", r, err)
			}
			out.Write(b)
			out.WriteByte('\n')
		}
		again, err := Read(&out, "again", opts)
		if err != nil {
			t.Fatalf("records written back do not read: %v", err)
		}
		if !reflect.DeepEqual(normal(recs), normal(again)) {
			t.Fatalf("records %+v written back read as %+v", recs, again)
		}
	})
}

// normal is recs with nil and empty slices made alike (JSON writes both).
func normal(recs []Record) []Record {
	out := make([]Record, len(recs))
	for i, r := range recs {
		for _, p := range []*[]string{&r.Pos, &r.Neg} {
			if len(*p) == 0 {
				*p = nil
			}
		}
		for _, p := range []*[]float64{&r.PosScores, &r.NegScores} {
			if len(*p) == 0 {
				*p = nil
			}
		}
		out[i] = r
	}
	return out
}
