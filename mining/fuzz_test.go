package mining

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzPairs feeds a pairs file ({"query", "pos" | "pos_ids", "prompt"} JSON
// lines) to OpenPairs. Every non-blank line becomes one unit, in order,
// named path:line; a unit without error comes from a line that is one valid
// JSON object whose query and positives it reproduces (each positive of the
// line is either kept or counted as a duplicate pair), its prompt overrides
// the default, and no (query, positive) pair is kept twice in the file.
func FuzzPairs(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "p.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		src, err := OpenPairs(ctx, path, PromptDefaults{Instruction: "default"})
		if err != nil {
			t.Fatalf("OpenPairs: %v", err)
		}
		defer src.Close()
		var lines [][]byte
		if len(data) > 0 {
			lines = bytes.Split(data, []byte("\n"))
			if len(lines[len(lines)-1]) == 0 {
				lines = lines[:len(lines)-1]
			}
		}
		var want []int
		for i, l := range lines {
			if len(bytes.TrimSpace(l)) > 0 {
				want = append(want, i+1)
			}
		}
		if src.Len() != len(want) {
			t.Fatalf("Len %d, %d non-blank lines", src.Len(), len(want))
		}
		kept := map[[2]string]bool{}
		for k, n := range want {
			u, err := src.Next(ctx)
			if err != nil {
				t.Fatalf("unit %d: %v", k, err)
			}
			if where := fmt.Sprintf("%s:%d", path, n); u.Where != where || u.Index != n-1 {
				t.Fatalf("unit %d: Where %q Index %d, want %q %d", k, u.Where, u.Index, where, n-1)
			}
			if u.Err != nil {
				continue
			}
			checkPairUnit(t, bytes.TrimRight(lines[n-1], "\r"), u)
			q := normText(u.Query.Text)
			for _, p := range u.Positives {
				key := [2]string{q, "id:" + p.ID}
				if p.ID == "" {
					key[1] = "text:" + normText(p.Text)
				}
				if kept[key] {
					t.Fatalf("line %d: pair %q kept twice", n, key)
				}
				kept[key] = true
			}
		}
		if _, err := src.Next(ctx); err != io.EOF {
			t.Fatalf("after the last unit: %v, want EOF", err)
		}
	})
}

func checkPairUnit(t *testing.T, line []byte, u Unit) {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil || !json.Valid(line) {
		t.Fatalf("line %q accepted but it is not one JSON object: %v", line, err)
	}
	q, _ := m["query"].(string)
	if q == "" || q != u.Query.Text || strings.TrimSpace(q) == "" {
		t.Fatalf("query %q, line has %v", u.Query.Text, m["query"])
	}
	wantInstr := "default"
	if p, _ := m["prompt"].(string); p != "" {
		wantInstr = p
	}
	if u.Query.Instruction != wantInstr {
		t.Fatalf("instruction %q, want %q", u.Query.Instruction, wantInstr)
	}
	var texts, ids []string
	switch p := m["pos"].(type) {
	case string:
		texts = []string{p}
	case []any:
		for _, v := range p {
			s, ok := v.(string)
			if !ok && v != nil {
				t.Fatalf("pos element %T accepted", v)
			}
			texts = append(texts, s)
		}
	case nil:
	default:
		t.Fatalf("pos of type %T accepted", p)
	}
	if p, ok := m["pos_ids"].([]any); ok {
		for _, v := range p {
			s, _ := v.(string)
			if s == "" {
				t.Fatalf("pos_ids element %v accepted", v)
			}
			ids = append(ids, s)
		}
	}
	var candidates int
	for _, s := range texts {
		if strings.TrimSpace(s) != "" {
			candidates++
		}
	}
	candidates += len(ids)
	if len(u.Positives)+u.DupPairs != candidates || candidates == 0 {
		t.Fatalf("%d positives + %d duplicates, line has %d: %q", len(u.Positives), u.DupPairs, candidates, line)
	}
	for _, p := range u.Positives {
		switch {
		case p.ID != "" && p.Text == "":
			if !slices.Contains(ids, p.ID) {
				t.Fatalf("positive ID %q not in pos_ids %q", p.ID, ids)
			}
			if _, ok := u.Exclude[keyID(p.ID)]; !ok {
				t.Fatalf("positive ID %q not excluded", p.ID)
			}
		case p.ID == "" && p.Text != "":
			if !slices.Contains(texts, p.Text) {
				t.Fatalf("positive %q not in pos %q", p.Text, texts)
			}
			if _, ok := u.Exclude[keyText(p.Text)]; !ok {
				t.Fatalf("positive %q not excluded", p.Text)
			}
		default:
			t.Fatalf("positive %+v", p)
		}
	}
}
