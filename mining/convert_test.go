package mining

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/format/flagembedding"
	"github.com/anna-search/anna/internal/shareddata"
)

// nliCounts recounts a shared NLI file independently of ConvertNLI: label
// counts over unique (premise, hypothesis) pairs, first occurrence wins.
func nliCounts(t *testing.T, path string) (ent, con, neu int, pairs map[[2]string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pairs = map[[2]string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		a, _ := m["premise"].(string)
		h, _ := m["hypothesis"].(string)
		if a == "" {
			a, h = m["sentence1"].(string), m["sentence2"].(string)
		}
		k := [2]string{strings.Join(strings.Fields(a), " "), strings.Join(strings.Fields(h), " ")}
		if _, ok := pairs[k]; ok {
			continue
		}
		lab := m["label"].(string)
		pairs[k] = lab
		switch lab {
		case "entailment":
			ent++
		case "contradiction":
			con++
		default:
			neu++
		}
	}
	return
}

func TestConvertNLIShared(t *testing.T) {
	dir := shareddata.Path(t, "datasets")
	for _, name := range []string{"snli/dev.jsonl", "sick/train.jsonl"} {
		path := filepath.Join(dir, name)
		ent, con, neu, labels := nliCounts(t, path)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		st, err := ConvertNLI(context.Background(), f, name, &out, NLIOptions{PosScore: 1, NegScore: 0})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st.Entailment != ent || st.Contradiction != con || st.Written != ent+con || st.NeutralDropped < neu {
			t.Errorf("%s: stats %+v; independent count ent %d con %d neu %d", name, st, ent, con, neu)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != ent+con {
			t.Fatalf("%s: %d lines, want %d", name, len(lines), ent+con)
		}
		seen := map[[2]string]bool{}
		for i, l := range lines {
			var p SimilarityPair
			if err := json.Unmarshal([]byte(l), &p); err != nil {
				t.Fatalf("%s out:%d: %v", name, i+1, err)
			}
			k := [2]string{strings.Join(strings.Fields(p.Sentence1), " "), strings.Join(strings.Fields(p.Sentence2), " ")}
			if seen[k] {
				t.Fatalf("%s out:%d: duplicate pair", name, i+1)
			}
			seen[k] = true
			want := map[string]float64{"entailment": 1, "contradiction": 0}[labels[k]]
			if lab := labels[k]; lab == "neutral" || lab == "" || p.Score != want {
				t.Fatalf("%s out:%d: label %q score %v", name, i+1, lab, p.Score)
			}
		}
		t.Logf("%s: %+v", name, st)
	}

	// Grouped FlagEmbedding form: premises with their entailed (pos) and
	// contradicted (neg) hypotheses.
	f, _ := os.Open(filepath.Join(dir, "snli/dev.jsonl"))
	defer f.Close()
	var out bytes.Buffer
	st, err := ConvertNLI(context.Background(), f, "snli/dev.jsonl", &out, NLIOptions{PosScore: 1, NegScore: 0, Format: "flag"})
	if err != nil {
		t.Fatal(err)
	}
	npos, nneg := 0, 0
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r flagembedding.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Pos) == 0 || len(r.Pos) != len(r.PosScores) || len(r.Neg) != len(r.NegScores) {
			t.Fatalf("bad group %s", l)
		}
		npos += len(r.Pos)
		nneg += len(r.Neg)
	}
	if npos != st.Entailment {
		t.Errorf("flag: %d positives for %d entailments", npos, st.Entailment)
	}
	if nneg > st.Contradiction || nneg == 0 {
		t.Errorf("flag: %d negatives for %d contradictions", nneg, st.Contradiction)
	}
}

func TestConvertNLIBad(t *testing.T) {
	in := `{"premise":"a","hypothesis":"b","label":"entailment"}
{"premise":"a","hypothesis":"c","label":"-"}
{"premise":"a","hypothesis":"d","label":2}
not json
`
	_, err := ConvertNLI(context.Background(), strings.NewReader(in), "x.jsonl", &bytes.Buffer{}, NLIOptions{PosScore: 1})
	if err == nil || !strings.Contains(err.Error(), "x.jsonl:2:") || !strings.Contains(err.Error(), `unknown label "-"`) {
		t.Fatalf("want error at x.jsonl:2, got %v", err)
	}
	st, err := ConvertNLI(context.Background(), strings.NewReader(in), "x.jsonl", &bytes.Buffer{}, NLIOptions{PosScore: 1, SkipBad: true})
	if err != nil || st.Bad != 2 || st.Entailment != 1 || st.Contradiction != 1 {
		t.Fatalf("skip-bad: %+v %v", st, err)
	}
}

func TestConvertPairs(t *testing.T) {
	in := writeFile(t, "p.jsonl", strings.Join([]string{
		`{"query":"q1","pos":["a","b","a"],"prompt":"task"}`,
		`{"query":"q1","pos":"b"}`,
		`{"query":"q2","pos_ids":["d1"]}`,
		`{"query":"q3","pos":[]}`,
	}, "\n")+"\n")
	corpus := &memCorpus{texts: map[string]string{"d1": "doc one"}}
	src, err := OpenPairs(context.Background(), in, PromptDefaults{Instruction: "default"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := ConvertPairs(context.Background(), src, corpus, &out, false); err == nil || !strings.Contains(err.Error(), "p.jsonl:4:") {
		t.Fatalf("want error naming line 4, got %v", err)
	}
	src.Close()
	src, _ = OpenPairs(context.Background(), in, PromptDefaults{Instruction: "default"})
	defer src.Close()
	out.Reset()
	st, err := ConvertPairs(context.Background(), src, corpus, &out, true)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"query":"q1","pos":["a"],"prompt":"task"}
{"query":"q1","pos":["b"],"prompt":"task"}
{"query":"q2","pos":["doc one"],"prompt":"default"}
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	if st.DuplicatePairs != 2 || st.BadUnits != 1 || st.Written != 3 {
		t.Errorf("stats %+v", st)
	}
}

// BEIR input: one example per (query, positive) from qrels; a positive
// missing from the corpus is bad input naming the qrels line.
func TestConvertBEIR(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "qrels"), 0o755)
	os.WriteFile(filepath.Join(dir, "queries.jsonl"), []byte(`{"_id":"1","text":"first"}`+"\n"+`{"_id":"2","text":"second"}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "qrels", "train.tsv"), []byte("query-id\tcorpus-id\tscore\n1\td1\t1\n1\td2\t1\n2\tmissing\t1\n1\td3\t0\n"), 0o644)
	corpus := &memCorpus{texts: map[string]string{"d1": "one", "d2": "two", "d3": "three"}}
	src, err := OpenBEIR(context.Background(), dir, "train", PromptDefaults{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, err = ConvertPairs(context.Background(), src, corpus, &out, false)
	if err == nil || !strings.Contains(err.Error(), "train.tsv:4 (query 2)") || !strings.Contains(err.Error(), `"missing" is not in the corpus`) {
		t.Fatalf("got %v", err)
	}
	if out.String() != `{"query":"first","pos":["one"]}`+"\n"+`{"query":"first","pos":["two"]}`+"\n" {
		t.Errorf("got %q", out.String())
	}
}
