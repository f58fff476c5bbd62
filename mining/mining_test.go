package mining

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/internal/encodertest"
	"github.com/anna-search/anna/internal/format/flagembedding"
	"github.com/anna-search/anna/internal/shareddata"
)

func TestThreshold(t *testing.T) {
	for _, pos := range []float64{0.8, 3, 97.5} {
		if got, want := Threshold(pos, 0.95), 0.95*pos; math.Abs(got-want) > 1e-12 {
			t.Errorf("Threshold(%v, .95) = %v, want m·pos = %v", pos, got, want)
		}
	}
	// Negative anchors: the threshold must stay below the positive, by 5% of
	// its magnitude; the naive m·pos would sit above it.
	for _, pos := range []float64{-0.3, -2, -7.5} {
		got := Threshold(pos, 0.95)
		if !(got < pos) {
			t.Errorf("Threshold(%v, .95) = %v, not below the positive", pos, got)
		}
		if want := pos * 1.05; math.Abs(got-want) > 1e-12 {
			t.Errorf("Threshold(%v, .95) = %v, want %v", pos, got, want)
		}
		if naive := 0.95 * pos; !(naive > pos) {
			t.Fatalf("test premise: naive rule %v should be above %v", naive, pos)
		}
	}
	if Threshold(0, 0.95) != 0 {
		t.Error("Threshold(0) should be 0")
	}
	if !math.IsInf(Threshold(-3, 0), 1) {
		t.Error("margin 0 should turn the rule off")
	}
	// Monotonic in margin for any sign.
	for _, pos := range []float64{-4, 4} {
		if !(Threshold(pos, 0.9) < Threshold(pos, 0.99)) {
			t.Errorf("threshold not increasing in margin at pos %v", pos)
		}
	}
}

// listRetriever returns a fixed list; scoreTeacher gives fixed scores by text.
type listRetriever []Candidate

func (l listRetriever) Retrieve(_ context.Context, _ Query, k int) ([]Candidate, error) {
	return l[:min(k, len(l))], nil
}

type scoreTeacher map[string]float64

func (s scoreTeacher) Name() string { return "fixed" }
func (s scoreTeacher) Score(_ context.Context, _ Query, docs []Doc) ([]float64, error) {
	out := make([]float64, len(docs))
	for i, d := range docs {
		out[i] = s[d.Text]
	}
	return out, nil
}

func fixedCorpus(cands listRetriever) *memCorpus {
	c := &memCorpus{texts: map[string]string{}}
	for _, x := range cands {
		c.ids = append(c.ids, x.ID)
		c.texts[x.ID] = x.Text
	}
	return c
}

// With cross-encoder-like negative logits, the miner must drop candidates
// above the positive and within 5% of its magnitude below it, and keep those
// further down: the naive 0.95·pos rule would keep "close" and "above".
func TestMarginNegativeScores(t *testing.T) {
	cands := listRetriever{
		{ID: "a", Text: "above"}, {ID: "b", Text: "close"}, {ID: "c", Text: "edge"},
		{ID: "d", Text: "far"}, {ID: "e", Text: "farther"},
	}
	teacher := scoreTeacher{"positive one": -2, "positive two": -1, "above": -1.95, "close": -2.05, "edge": -2.1, "far": -2.5, "farther": -6}
	pairs := writeFile(t, "p.jsonl", `{"query":"q","pos":["positive one","positive two"]}`+"\n")
	opt := DefaultOptions()
	opt.Negatives = 10
	opt.Grouped = true
	m, err := New(cands, teacher, fixedCorpus(cands), opt)
	if err != nil {
		t.Fatal(err)
	}
	src, err := OpenPairs(context.Background(), pairs, PromptDefaults{})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir() + "/o.jsonl"
	st, err := m.Run(context.Background(), src, out)
	if err != nil {
		t.Fatal(err)
	}
	recs := readFlag(t, out)
	if len(recs) != 1 {
		t.Fatalf("got %d records", len(recs))
	}
	// Anchor = lowest positive (−2), threshold −2.1: "edge" (= threshold) is kept.
	if got, want := recs[0].Neg, []string{"edge", "far", "farther"}; !slices.Equal(got, want) {
		t.Errorf("negatives %v, want %v", got, want)
	}
	if st.DroppedMargin != 2 || st.Negatives != 3 || st.ShortUnits != 1 {
		t.Errorf("stats: dropped %d negatives %d short %d; want 2, 3, 1", st.DroppedMargin, st.Negatives, st.ShortUnits)
	}
	if !slices.Equal(recs[0].PosScores, []float64{-2, -1}) || !slices.Equal(recs[0].NegScores, []float64{-2.1, -2.5, -6}) {
		t.Errorf("scores %v / %v", recs[0].PosScores, recs[0].NegScores)
	}
}

func TestFiltersAndWindow(t *testing.T) {
	cands := listRetriever{
		{ID: "p", Text: "the positive"},                               // known positive by text
		{ID: "t", Text: "Title. the  positive", Body: "the positive"}, // the same document with its title
		{ID: "q", Text: "  my   query "},                              // the query itself
		{ID: "x", Text: "c1"}, {ID: "y", Text: "c1"},                  // duplicate text
		{ID: "2", Text: "c2"}, {ID: "3", Text: "c3"}, {ID: "4", Text: "c4"}, {ID: "5", Text: "c5"},
	}
	teacher := scoreTeacher{"the positive": 10, "c1": 9, "c2": 8, "c3": 5, "c4": 1, "c5": -1}
	pairs := writeFile(t, "p.jsonl", `{"query":"my query","pos":"the positive"}`+"\n")
	opt := DefaultOptions()
	opt.Negatives = 5
	opt.Margin = 0
	opt.AbsMargin = 1.5 // drops c1 (9 > 8.5)
	opt.MinScore = 0    // drops c5
	opt.MaxScore = 6    // drops c2
	c := fixedCorpus(cands)
	out, st, err := mineWith(t, cands, c, teacher, pairs, opt)
	if err != nil {
		t.Fatal(err)
	}
	recs := readFlag(t, out)
	if got := recs[0].Neg; !slices.Equal(got, []string{"c3", "c4"}) {
		t.Errorf("negatives %v", got)
	}
	if st.ExcludedPositive != 2 || st.ExcludedSameText != 2 || st.DroppedAbsMargin != 1 || st.DroppedFloor != 1 || st.DroppedCeiling != 1 {
		t.Errorf("stats %+v", st)
	}
	if recs[0].Prompt != "Find the document." || recs[0].Teacher != "fixed" || recs[0].Type != "normal" {
		t.Errorf("prompt/teacher/type: %q %q %q", recs[0].Prompt, recs[0].Teacher, recs[0].Type)
	}

	// Rank window [1, 3) over c1 c2 c3 c4 c5 → c2, c3; top sampling of 1 → c2.
	opt = DefaultOptions()
	opt.Margin = 0
	opt.RangeMin, opt.RangeMax = 1, 3
	opt.Negatives = 1
	opt.Sampling = SampleTop
	out, st, err = mineWith(t, cands, c, teacher, pairs, opt)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFlag(t, out)[0].Neg; !slices.Equal(got, []string{"c2"}) {
		t.Errorf("window+top: %v", got)
	}
	if st.OutsideWindow != 3 {
		t.Errorf("outside window %d, want 3", st.OutsideWindow)
	}
}

// TestRequirePositiveTop: with RequireTop, a positive the teacher ranks
// below the top k of itself and its candidates (ties against it) writes no
// example and is counted; one within keeps its example, whose negatives
// are drawn as usual.
func TestRequirePositiveTop(t *testing.T) {
	cands := listRetriever{{ID: "1", Text: "c1"}, {ID: "2", Text: "c2"}, {ID: "3", Text: "c3"}, {ID: "4", Text: "c4"}}
	teacher := scoreTeacher{"strong": 10, "tied": 8, "weak": 5, "c1": 9, "c2": 8, "c3": 2, "c4": 1}
	pairs := writeFile(t, "p.jsonl", `{"query":"a","pos":"strong"}`+"\n"+`{"query":"b","pos":"tied"}`+"\n"+`{"query":"c","pos":"weak"}`+"\n")
	for _, c := range []struct {
		k        int
		kept     []string
		filtered int
	}{
		{0, []string{"strong", "tied", "weak"}, 0}, // off
		{1, []string{"strong"}, 2},                 // rank 1; tied: 3 (c1, c2 ≥ 8); weak: 3
		{3, []string{"strong", "tied", "weak"}, 0},
		{2, []string{"strong"}, 2},
	} {
		opt := DefaultOptions()
		opt.Margin, opt.Negatives, opt.RequireTop = 0, 2, c.k
		out, st, err := mineWith(t, cands, fixedCorpus(cands), teacher, pairs, opt)
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for _, r := range readFlag(t, out) {
			kept = append(kept, r.Pos[0])
			if len(r.Neg) != 2 {
				t.Fatalf("k=%d: %d negatives, want 2", c.k, len(r.Neg))
			}
		}
		if !slices.Equal(kept, c.kept) || st.FilteredPositives != c.filtered || st.Examples != len(c.kept) {
			t.Fatalf("k=%d: kept %v (%d examples), %d filtered; want %v, %d", c.k, kept, st.Examples, st.FilteredPositives, c.kept, c.filtered)
		}
	}
}

// Every mined line of a synthetic set obeys the rules, and the output is a
// function of (seed, input) only: not of the number of workers.
func TestMineSyntheticRules(t *testing.T) {
	c, pairs := synth(t, 400, 120, 1)
	opt := DefaultOptions()
	opt.Seed = 42
	opt.Workers = 1
	out1, st1, err := mine(t, c, overlapTeacher, pairs, opt)
	if err != nil {
		t.Fatal(err)
	}
	opt.Workers = 4
	out4, st4, err := mine(t, c, overlapTeacher, pairs, opt)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(out1)
	b4, _ := os.ReadFile(out4)
	if string(b1) != string(b4) {
		t.Fatal("output depends on the number of workers")
	}
	j1, _ := json.Marshal(st1)
	j4, _ := json.Marshal(st4)
	if string(j1) != string(j4) {
		t.Errorf("stats depend on workers:\n%s\n%s", j1, j4)
	}
	opt.Seed = 43
	out43, _, err := mine(t, c, overlapTeacher, pairs, opt)
	if err != nil {
		t.Fatal(err)
	}
	b43, _ := os.ReadFile(out43)
	if string(b1) == string(b43) {
		t.Error("a different seed gave the same sample")
	}

	// Known positives per query, from the input.
	known := map[string]map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(mustRead(t, pairs))), "\n") {
		var r struct {
			Query string   `json:"query"`
			Pos   []string `json:"pos"`
		}
		json.Unmarshal([]byte(l), &r)
		if known[r.Query] == nil {
			known[r.Query] = map[string]bool{}
		}
		for _, p := range r.Pos {
			known[r.Query][p] = true
		}
	}
	recs := readFlag(t, out1)
	if len(recs) != st1.Examples || st1.Examples == 0 {
		t.Fatalf("%d records, stats say %d", len(recs), st1.Examples)
	}
	for i, r := range recs {
		if len(r.Pos) != 1 || len(r.PosScores) != 1 || len(r.NegScores) != len(r.Neg) || len(r.Neg) == 0 || len(r.Neg) > 7 {
			t.Fatalf("line %d: shape pos %d/%d neg %d/%d", i+1, len(r.Pos), len(r.PosScores), len(r.Neg), len(r.NegScores))
		}
		if len(r.Neg) < 7 && st1.ShortExamples == 0 {
			t.Errorf("line %d short but no short examples counted", i+1)
		}
		for j, n := range r.Neg {
			if known[r.Query][n] || n == r.Query {
				t.Errorf("line %d: negative %q is a known positive or the query", i+1, n)
			}
			if want := overlapTeacher.f(r.Query, n); r.NegScores[j] != want {
				t.Errorf("line %d: neg score %v, teacher says %v", i+1, r.NegScores[j], want)
			}
		}
		// The anchor is the lowest positive of the query's line; score it
		// again with the teacher to check the margin.
		anchor := math.Inf(1)
		for p := range known[r.Query] {
			anchor = math.Min(anchor, overlapTeacher.f(r.Query, p))
		}
		for _, s := range r.NegScores {
			if s > Threshold(anchor, 0.95) {
				t.Errorf("line %d: negative score %v above threshold %v", i+1, s, Threshold(anchor, 0.95))
			}
		}
	}
	if st1.PosScores.N != st1.Examples || st1.NegScores.N != st1.Negatives {
		t.Errorf("score summaries: %d pos for %d examples, %d neg for %d", st1.PosScores.N, st1.Examples, st1.NegScores.N, st1.Negatives)
	}
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Duplicate pairs are removed, and a positive given on another line of the
// same query is never a negative.
func TestDedupAndCrossLinePositives(t *testing.T) {
	cands := listRetriever{{ID: "1", Text: "alpha"}, {ID: "2", Text: "beta"}, {ID: "3", Text: "gamma"}, {ID: "4", Text: "delta"}}
	teacher := scoreTeacher{"alpha": 5, "beta": 4, "gamma": 1, "delta": 0.5}
	pairs := writeFile(t, "p.jsonl", strings.Join([]string{
		`{"query":"q1","pos":["alpha","alpha"]}`,
		``, // blank lines are skipped, not errors
		`{"query":"q1","pos":["alpha","beta"]}`,
		`{"query":" q1 ","pos":"beta"}`,
	}, "\n")+"\n\n")
	opt := DefaultOptions()
	opt.Margin = 0
	out, st, err := mineWith(t, cands, fixedCorpus(cands), teacher, pairs, opt)
	if err != nil {
		t.Fatal(err)
	}
	recs := readFlag(t, out)
	if len(recs) != 2 || recs[0].Pos[0] != "alpha" || recs[1].Pos[0] != "beta" {
		t.Fatalf("records %+v", recs)
	}
	if st.DuplicatePairs != 3 || st.Units != 3 {
		t.Errorf("duplicate pairs %d, units %d; want 3, 3", st.DuplicatePairs, st.Units)
	}
	for _, r := range recs {
		if !slices.Equal(r.Neg, []string{"gamma", "delta"}) {
			t.Errorf("pos %q: negatives %v (beta/alpha are positives of q1)", r.Pos[0], r.Neg)
		}
	}
	// Two positive IDs with the same text are one pair.
	corp := fixedCorpus(cands)
	corp.texts["5"] = " alpha"
	pairs = writeFile(t, "ids.jsonl", `{"query":"q2","pos_ids":["1","5"]}`+"\n")
	out, st, err = mineWith(t, cands, corp, teacher, pairs, opt)
	if err != nil {
		t.Fatal(err)
	}
	if recs := readFlag(t, out); len(recs) != 1 || st.DuplicatePairs != 1 {
		t.Errorf("same-text positives: %d records, %d duplicates; want 1, 1", len(recs), st.DuplicatePairs)
	}
}

func TestBadInput(t *testing.T) {
	c, _ := synth(t, 50, 1, 3)
	good := `{"query":"w1 w2","pos":["` + c.texts["d0"] + `"]}`
	lines := []string{
		good,
		`{"query":"w3","pos":[]}`,           // 2: no positive
		`{"query":"w4","pos_ids":["nope"]}`, // 3: not in corpus
		`{"query":"w5", "pos": ["x"]`,       // 4: malformed
		`{"query":"w6","pos_ids":["d1"]}`,   // good, by ID
		`{"pos":["x"]}`,                     // 6: no query
	}
	pairs := writeFile(t, "bad.jsonl", strings.Join(lines, "\n")+"\n")
	opt := DefaultOptions()
	opt.Margin = 0
	opt.Strict = true // a positive not in the corpus is bad input (skipped and counted without it)
	_, _, err := mine(t, c, overlapTeacher, pairs, opt)
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl:2:") || !strings.Contains(err.Error(), "no positive") {
		t.Fatalf("want an error naming line 2, got %v", err)
	}
	for _, tc := range []struct{ line, want string }{
		{lines[2], `"nope" is not in the corpus`},
		{lines[3], "malformed JSON"},
		{lines[5], `missing field "query"`},
	} {
		p := writeFile(t, "one.jsonl", good+"\n"+tc.line+"\n")
		_, _, err := mine(t, c, overlapTeacher, p, opt)
		if err == nil || !strings.Contains(err.Error(), "one.jsonl:2:") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("line %s: want error at one.jsonl:2 with %q, got %v", tc.line, tc.want, err)
		}
	}
	opt.SkipBad = true
	out, st, err := mine(t, c, overlapTeacher, pairs, opt)
	if err != nil {
		t.Fatal(err)
	}
	if st.BadUnits != 4 || st.Units != 6 || st.Examples != 2 {
		t.Errorf("skip-bad stats: bad %d units %d examples %d; want 4, 6, 2", st.BadUnits, st.Units, st.Examples)
	}
	if got := len(readFlag(t, out)); got != 2 {
		t.Errorf("%d lines written, want 2", got)
	}
}

func TestFormats(t *testing.T) {
	c, pairs := synth(t, 200, 20, 5)
	for _, f := range []Format{FormatTriplet, FormatNTuple, FormatLabeledList} {
		opt := DefaultOptions()
		opt.Format = f
		opt.Negatives = 3
		out, st, err := mine(t, c, overlapTeacher, pairs, opt)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(mustRead(t, out))), "\n")
		if len(lines) != st.Lines || st.Lines == 0 {
			t.Fatalf("%s: %d lines, stats %d", f, len(lines), st.Lines)
		}
		for _, l := range lines {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			switch f {
			case FormatTriplet:
				if len(m) != 3 || m["anchor"] == nil || m["positive"] == nil || m["negative"] == nil {
					t.Fatalf("triplet %s", l)
				}
			case FormatNTuple:
				if len(m) != 5 || !strings.HasPrefix(l, `{"anchor":`) || !strings.Contains(l, `"negative_3":`) {
					t.Fatalf("n-tuple %s", l)
				}
			case FormatLabeledList:
				if len(m["answer"].([]any)) != len(m["labels"].([]any)) || m["labels"].([]any)[0].(float64) != 1 {
					t.Fatalf("labeled list %s", l)
				}
			}
		}
		if f == FormatTriplet && st.Lines != st.Negatives {
			t.Errorf("triplets: %d lines for %d negatives", st.Lines, st.Negatives)
		}
	}
}

// Our flagembedding.Record reads the published FlagEmbedding samples, field for field.
func TestFlagEmbeddingSamples(t *testing.T) {
	dir := shareddata.Path(t, "datasets", "flagembedding-examples")
	for _, name := range []string{"msmarco.jsonl", "nq.jsonl"} {
		b := mustRead(t, dir+"/"+name)
		for i, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var generic map[string]any
			json.Unmarshal([]byte(l), &generic)
			var r flagembedding.Record
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatal(err)
			}
			for k := range generic {
				switch k {
				case "query", "pos", "neg", "pos_scores", "neg_scores", "prompt", "type":
				default:
					t.Errorf("%s:%d: field %q not in our format", name, i+1, k)
				}
			}
			if len(r.PosScores) != len(r.Pos) || len(r.NegScores) != len(r.Neg) || r.Type == "" || r.Prompt == "" {
				t.Errorf("%s:%d: sample does not fill our fields", name, i+1)
			}
		}
	}
}

// countingEncoder counts query embeddings.
type countingEncoder struct {
	encodertest.Hashing
	queries int
}

func (c *countingEncoder) EmbedQueries(ctx context.Context, qs []string, p encoder.Prompt) ([][]float32, error) {
	c.queries += len(qs)
	return c.Hashing.EmbedQueries(ctx, qs, p)
}

func TestQueryMemo(t *testing.T) {
	ctx := context.Background()
	docs := &countingEncoder{Hashing: encodertest.Hashing{D: 16, FP: "fp"}}
	qs := &countingEncoder{Hashing: encodertest.Hashing{D: 16, FP: "fp"}}
	m, err := NewQueryMemo(docs, qs, 2)
	if err != nil {
		t.Fatal(err)
	}
	p := encoder.Prompt{Instruction: "task"}
	a1, _ := m.EmbedQueries(ctx, []string{"a"}, p)
	a2, _ := m.EmbedQueries(ctx, []string{"a"}, p)
	if qs.queries != 1 || docs.queries != 0 || !slices.Equal(a1[0], a2[0]) {
		t.Fatalf("second call not memoised: %d model calls", qs.queries)
	}
	m.EmbedQueries(ctx, []string{"a"}, encoder.Prompt{}) // another prompt is another key
	m.EmbedQueries(ctx, []string{"b"}, p)                // evicts ("a", task)
	m.EmbedQueries(ctx, []string{"a"}, p)
	if qs.queries != 4 {
		t.Errorf("%d model calls, want 4 (prompt keyed, FIFO of 2)", qs.queries)
	}
	// The dense teacher scores cosines: a document equal to the query scores 1.
	s, err := (&DenseTeacher{Enc: m}).Score(ctx, Query{Text: "x y"}, []Doc{{Text: "x y"}, {Text: "z"}})
	if err != nil || math.Abs(s[0]-1) > 1e-6 || s[1] >= s[0] {
		t.Errorf("dense teacher scores %v, %v", s, err)
	}
	if _, err := NewQueryMemo(docs, &encodertest.Hashing{D: 16, FP: "other"}, 2); err == nil {
		t.Error("mismatched fingerprints accepted")
	}
}

func TestPromptConversion(t *testing.T) {
	p := Prompt(Query{Text: "q", Instruction: "task", Examples: []Shot{{Query: "a", Response: "b"}}})
	if p.Instruction != "task" || len(p.Examples) != 1 || p.Examples[0] != (encoder.Example{Query: "a", Response: "b"}) {
		t.Errorf("prompt %+v", p)
	}
	if !Prompt(Query{Text: "q"}).IsZero() {
		t.Error("a query without instruction should give the zero prompt")
	}
}
