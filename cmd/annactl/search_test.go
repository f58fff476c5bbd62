package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// searchJSON runs `annactl search --json` and decodes its lines.
func searchJSON(t *testing.T, args ...string) []jsonResult {
	t.Helper()
	r := mustRun(t, append([]string{"search", "--json"}, args...)...)
	var out []jsonResult
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var jr jsonResult
		if err := json.Unmarshal([]byte(line), &jr); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, jr)
	}
	return out
}

// TestSearchFiltersAndSnippets: --where and --where-json restrict the results
// to matching metadata (all of them when fewer than -k match), bad filters
// are usage errors naming the part, snippets are offsets into the text,
// and chunking flags are checked and recorded.
func TestSearchFiltersAndSnippets(t *testing.T) {
	needModel(t)
	dir := filepath.Join(t.TempDir(), "ix")
	mustRun(t, "index", "--index", dir, "--chunk-tokens", "32", filepath.Join("..", "..", "testdata", "demo", "corpus.jsonl"))
	topics := func(rs []jsonResult) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Meta["topic"].String())
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	idsOf := func(rs []jsonResult) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		slices.Sort(out)
		return out
	}
	for _, mode := range []string{"lexical", "dense", "hybrid"} {
		// The demo corpus has three food documents; dense finds all of them.
		rs := searchJSON(t, "--index", dir, "--mode", mode, "-k", "10", "--where", "topic=food", "fresh bread and pasta with coffee")
		if got := idsOf(rs); mode != "lexical" && !slices.Equal(got, []string{"bread", "coffee", "pasta"}) {
			t.Fatalf("%s --where topic=food: %v", mode, got)
		}
		if got := topics(rs); !slices.Equal(got, []string{"food"}) {
			t.Fatalf("%s --where topic=food: topics %v", mode, got)
		}
	}
	rs := searchJSON(t, "--index", dir, "--mode", "dense", "-k", "24", "--where", "topic=food", "--where", "topic=garden", "food")
	if got := topics(rs); !slices.Equal(got, []string{"food", "garden"}) || len(rs) != 4 {
		t.Fatalf("two values of one key: %d results, topics %v", len(rs), got)
	}
	rs = searchJSON(t, "--index", dir, "--mode", "dense", "-k", "24", "--where", "topic!=food", "--where", "topic^=s", "food")
	if got := topics(rs); !slices.Equal(got, []string{"search", "software"}) || len(rs) != 7 {
		t.Fatalf("!= and ^=: %d results, topics %v", len(rs), got)
	}
	fpath := filepath.Join(t.TempDir(), "filter.json")
	os.WriteFile(fpath, []byte(`{"or": [{"topic": "health"}, {"in": {"topic": ["hobby"]}}]}`), 0o644)
	rs = searchJSON(t, "--index", dir, "--mode", "dense", "-k", "24", "--where-json", "@"+fpath, "exercise")
	if got := topics(rs); !slices.Equal(got, []string{"health", "hobby"}) || len(rs) != 5 {
		t.Fatalf("--where-json @file: %d results, topics %v", len(rs), got)
	}
	for _, bad := range [][]string{
		{"--where", "topic"},
		{"--where", "=food"},
		{"--where-json", `{"or": [{"topic": "x"}, {"in": {"topic": []}}]}`},
		{"--where-json", `{"topic": [3]}`},
		{"--where", " = food"},
		{"--where-json", "@" + filepath.Join(t.TempDir(), "missing.json")},
		{"--snippet-size", "-1"},
	} {
		r := annactl(t, "", append([]string{"search", "--index", dir}, append(bad, "food")...)...)
		if r.code == 0 || r.stdout != "" {
			t.Fatalf("search %v: %s, want a failure", bad, r)
		}
		if strings.Contains(bad[1], "[]") && !strings.Contains(r.stderr, "$.or[1].in.topic") {
			t.Fatalf("search %v: %q does not name the bad part", bad, r.stderr)
		}
	}

	// Snippets: offsets into the text, highlights inside them; the table
	// written to a pipe has no terminal escapes.
	rs = searchJSON(t, "--index", dir, "--snippets", "-k", "5", "leavened wild yeast fermentation")
	if rs[0].ID != "bread" || rs[0].Snippet == nil {
		t.Fatalf("snippets: %+v", rs[0])
	}
	for _, r := range rs {
		s := r.Snippet
		if s == nil || r.Text[s.Start:s.End] != s.Text {
			t.Fatalf("%s: snippet %+v is not text[start:end]", r.ID, s)
		}
		for _, h := range s.Highlights {
			if h[0] < s.Start || h[1] > s.End {
				t.Fatalf("%s: highlight %v outside [%d, %d)", r.ID, h, s.Start, s.End)
			}
		}
	}
	// Split into 32-token windows, bread's snippet comes from a passage
	// (dense ranks it first too) holding every query term.
	var words []string
	for _, h := range rs[0].Snippet.Highlights {
		words = append(words, rs[0].Text[h[0]:h[1]])
	}
	if got := rs[0].Snippet; got.Source != "passage" || !slices.Equal(words, []string{"leavened", "wild", "yeast", "fermentation"}) {
		t.Fatalf("bread's snippet: %+v (%q), want its passage with the query's terms", got, words)
	}
	if r := mustRun(t, "search", "--index", dir, "wild yeast"); strings.Contains(r.stdout, "\x1b[") || !strings.Contains(r.stdout, "yeast") {
		t.Fatalf("table in a pipe: %q", r.stdout)
	}

	// Fusion flags reach the engine: minmax scores of the two lists summed,
	// dense weighted 2, lie in [0, 3] with the top one above 1 (each
	// list's best is 1); RRF's are at most 2/61.
	rs = searchJSON(t, "--index", dir, "--fusion", "minmax", "--weight", "dense=2", "-k", "5", "leavened wild yeast fermentation")
	if rs[0].ID != "bread" || rs[0].Score <= 1 || rs[0].Score > 3 {
		t.Fatalf("--fusion minmax --weight dense=2: %s %g, want bread above 1", rs[0].ID, rs[0].Score)
	}
	if rs = searchJSON(t, "--index", dir, "--fusion", "rrf", "-k", "5", "leavened wild yeast fermentation"); rs[0].Score > 2.0/61 {
		t.Fatalf("RRF score %g", rs[0].Score)
	}
	def := searchJSON(t, "--index", dir, "-k", "5", "leavened wild yeast fermentation")
	if dbsf := searchJSON(t, "--index", dir, "--fusion", "dbsf", "-k", "5", "leavened wild yeast fermentation"); def[0].ID != dbsf[0].ID || def[0].Score != dbsf[0].Score {
		t.Fatalf("the default fusion: %s %g, --fusion dbsf: %s %g", def[0].ID, def[0].Score, dbsf[0].ID, dbsf[0].Score)
	}

	// Chunking flags: validated, recorded, changed by reindex.
	for _, bad := range [][]string{{"--chunk-tokens", "-1"}, {"--no-chunking", "--chunk-tokens", "64"}, {"--chunk-tokens", "4"}} {
		r := annactl(t, "", append([]string{"index", "--index", filepath.Join(t.TempDir(), "x")}, append(bad, filepath.Join("..", "..", "testdata", "demo", "corpus.jsonl"))...)...)
		if r.code == 0 {
			t.Fatalf("index %v: %s, want a failure", bad, r)
		}
	}
	if r := annactl(t, "", "index", "--index", dir, "--chunk-tokens", "128", filepath.Join("..", "..", "testdata", "demo", "corpus.jsonl")); r.code == 0 || !strings.Contains(r.stderr, "\n  run: annactl reindex --index "+dir+" --chunk-tokens N\n") {
		t.Fatalf("index with another chunking: %s, want a refusal pointing to reindex", r)
	}
	st, _ := statsOf(t, dir)
	if st.Chunking != "window=32,stride=half" || st.DensePassages <= st.DenseDocs {
		t.Fatalf("stats: chunking %q, %d passages for %d docs; want window=32 and some documents split", st.Chunking, st.DensePassages, st.DenseDocs)
	}
	if r := mustRun(t, "reindex", "--index", dir, "--no-chunking"); !strings.Contains(r.stderr, "-> off") {
		t.Fatalf("reindex --no-chunking: %s", r)
	}
	st, _ = statsOf(t, dir)
	if st.Chunking != "off" || st.DensePassages != st.DenseDocs || st.DenseDocs != 24 {
		t.Fatalf("after reindex --no-chunking: %+v", st)
	}
	if r := annactl(t, "", "reindex", "--index", dir); r.code != 2 {
		t.Fatalf("reindex without --model or a chunking flag: %s, want a usage error", r)
	}
}
