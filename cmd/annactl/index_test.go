package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/engine"
)

func TestIndexMalformedLineKeepsEarlierLines(t *testing.T) {
	needModel(t)
	ctx := context.Background()
	tmp := t.TempDir()
	file := filepath.Join(tmp, "corpus.jsonl")
	lines := []string{
		`{"_id":"a","title":"A","text":"apples are red"}`,
		`{"_id":"b","text":"bananas are yellow"}`,
		`{"_id":"a","text":"apples are green"}`, // duplicate id: the last wins
		`{"_id":"c","text": broken`,
		`{"_id":"d","text":"dates are brown"}`,
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "idx")
	var stderr strings.Builder
	if code := run(ctx, []string{"index", "--index", dir, "--batch", "1", file}, strings.NewReader(""), io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "corpus.jsonl:4") {
		t.Fatalf("want exit 1 and an error naming corpus.jsonl:4, got %d: %s", code, stderr.String())
	}
	eng, err := engine.Open(ctx, dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := eng.Stats()
	got, _ := eng.Get(ctx, "a")
	d := got[0]
	eng.Close()
	if st.Documents != 2 || d.Text != "apples are green" {
		t.Fatalf("after the bad line: %d docs (want a, b kept), a=%q", st.Documents, d.Text)
	}
	// --skip-bad goes on past it; unchanged docs are not re-embedded.
	if code := run(ctx, []string{"index", "--index", dir, "--skip-bad", file}, strings.NewReader(""), io.Discard, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	eng, err = engine.Open(ctx, dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if st, _ := eng.Stats(); st.Documents != 3 {
		t.Fatalf("with --skip-bad: %d docs, want 3", st.Documents)
	}
	res, err := eng.Search(ctx, "dates", engine.SearchOptions{Mode: engine.ModeLexical, K: 1})
	if err != nil || len(res) != 1 || res[0].ID != "d" {
		t.Fatalf("search after resume: %v %v", res, err)
	}
}

// TestIndexFolder: a folder of text files is indexed by relative path;
// a changed file is updated, a binary one named and skipped, and --sync
// removes the documents of deleted files.
func TestIndexFolder(t *testing.T) {
	needModel(t)
	ctx := context.Background()
	tmp := t.TempDir()
	notes := filepath.Join(tmp, "notes")
	put := func(rel, body string) {
		p := filepath.Join(notes, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("vitamins.md", "# Vitamin D\n\nDeficiency is linked to bone density loss.\n")
	put("drinks/coffee.txt", "Caffeine raises alertness.")
	put("blob.txt", "bin\x00ary")
	dir := filepath.Join(tmp, "idx")
	index := func(extra ...string) string {
		var stderr strings.Builder
		if code := run(ctx, append([]string{"index", "--index", dir}, append(extra, notes)...), strings.NewReader(""), io.Discard, &stderr); code != 0 {
			t.Fatalf("index exit %d: %s", code, stderr.String())
		}
		return stderr.String()
	}
	if out := index(); !strings.Contains(out, "indexed "+notes+": 2 read, 1 skipped: 1 .txt (binary)") || !strings.Contains(out, "2 files read") || !strings.Contains(out, "2 added") || !strings.Contains(out, "warning: blob.txt: binary") {
		t.Fatalf("first index: %s", out)
	}
	// --strict: the failed file makes the run exit 1 (the others still
	// indexed), though, unchanged since it failed, it is not read again.
	var stderr strings.Builder
	if code := run(ctx, []string{"index", "--index", dir, "--strict", "--exclude", "drinks/**", notes}, strings.NewReader(""), io.Discard, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "--strict: 1 file failed to read") || !strings.Contains(stderr.String(), "1 folder (ignored)") ||
		!strings.Contains(stderr.String(), "warning: blob.txt: binary") || !strings.Contains(stderr.String(), "1 file failed before and unchanged (not read again)") {
		t.Fatalf("--strict: exit %d\n%s", code, stderr.String())
	}
	put("drinks/coffee.txt", "Caffeine raises alertness and blood pressure.")
	os.Remove(filepath.Join(notes, "vitamins.md"))
	if out := index("--sync"); !strings.Contains(out, "1 updated") || !strings.Contains(out, "1 file gone") || !strings.Contains(out, "1 removed") {
		t.Fatalf("second index: %s", out)
	}
	eng, err := engine.Open(ctx, dir, engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ids, _ := eng.Teacher().IDs(ctx)
	docs, _ := eng.Get(ctx, "drinks/coffee.txt")
	if len(ids) != 1 || len(docs) != 1 || docs[0].Title != "Caffeine raises alertness and blood pressure." || docs[0].Meta["ext"] != "txt" || !strings.Contains(docs[0].Text, "blood pressure") {
		t.Fatalf("after --sync: ids %q, %+v", ids, docs)
	}
}

// TestIndexPrecision: a new index is built with the default model's int8
// form unless --precision float32 is given; the index records which (stats
// says so), a later index run keeps it, and asking for the other precision
// of a bound index is refused, naming reindex.
func TestIndexPrecision(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	corpus := writeCorpus(t, tmp, 6, 12, 1)
	for _, c := range []struct{ flag, want string }{{"", "int8"}, {"float32", "float32"}} {
		dir := filepath.Join(tmp, "idx-"+c.want)
		args := []string{"index", "--index", dir, corpus}
		if c.flag != "" {
			args = append(args, "--precision", c.flag)
		}
		mustRun(t, args...)
		st, r := statsOf(t, dir)
		if st.Precision != c.want || !strings.Contains(mustRun(t, "stats", "--index", dir).stdout, "precision      "+c.want) {
			t.Fatalf("--precision %q: stats says %q, want %q\n%s", c.flag, st.Precision, c.want, r)
		}
		if c.want == "int8" && !strings.HasSuffix(st.ModelName, "-int8") {
			t.Fatalf("default precision: model %q, want the -int8 form", st.ModelName)
		}
		mustRun(t, "index", "--index", dir, corpus) // a bound index keeps its model
		other := map[string]string{"int8": "float32", "float32": "int8"}[c.want]
		if r := annactl(t, "", "index", "--index", dir, "--precision", other, corpus); r.code != 1 || !strings.Contains(r.stderr, "reindex") {
			t.Fatalf("--precision %s on a %s index: want exit 1 naming reindex, got %s", other, c.want, r)
		}
		if st2, _ := statsOf(t, dir); st2.Model != st.Model || st2.Documents != 6 {
			t.Fatalf("after the refused run: model %s (was %s), %d documents", st2.Model, st.Model, st2.Documents)
		}
	}
	if r := annactl(t, "", "index", "--index", filepath.Join(tmp, "bad"), "--precision", "fp16", corpus); r.code != 2 || !strings.Contains(r.stderr, "--precision") {
		t.Fatalf("--precision fp16: want a usage error naming the flag, got %s", r)
	}
}

// TestIndexBrokenModel: a model that fails to embed (its graph cut short)
// makes `annactl index` of a folder and of JSON lines exit 1 naming the
// model's file, on a rerun too, with nothing stored.
func TestIndexBrokenModel(t *testing.T) {
	src := needModel(t)
	ctx := context.Background()
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "bad")
	os.MkdirAll(bad, 0o755)
	for _, f := range []string{"anna-model.json", "config.json", "tokenizer.json", "model.onnx"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "model.onnx" {
			data = data[:len(data)/100]
		}
		os.WriteFile(filepath.Join(bad, f), data, 0o644)
	}
	notes := filepath.Join(tmp, "notes")
	os.MkdirAll(notes, 0o755)
	os.WriteFile(filepath.Join(notes, "wicks.md"), []byte("# Wicks\n\nTrim the wicks before the watch.\n"), 0o644)
	corpus := filepath.Join(tmp, "c.jsonl")
	os.WriteFile(corpus, []byte(`{"_id":"a","text":"Trim the wicks."}`+"\n"), 0o644)
	for _, in := range []string{notes, corpus} {
		dir := filepath.Join(tmp, "idx-"+filepath.Base(in))
		for try := 1; try <= 2; try++ {
			var stderr strings.Builder
			code := run(ctx, []string{"index", "--index", dir, "--model", bad, "--precision", "float32", in}, strings.NewReader(""), io.Discard, &stderr)
			if code == 0 || !strings.Contains(stderr.String(), "annactl index: engine: embedding") || !strings.Contains(stderr.String(), filepath.Join(bad, "model.onnx")) {
				t.Fatalf("%s, run %d: exit %d\n%s", in, try, code, stderr.String())
			}
		}
		eng, err := engine.Open(ctx, dir, engine.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := eng.Stats(); st.Documents != 0 {
			t.Errorf("%s: %d documents stored", in, st.Documents)
		}
		eng.Close()
	}
}
