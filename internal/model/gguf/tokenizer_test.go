package gguf

import (
	"bufio"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/anna-search/anna/internal/model/gguf/gguftest"
	"github.com/anna-search/anna/internal/reftest"
	"github.com/anna-search/anna/internal/tokenizer"
)

// committedTexts are the distinct texts of the tokenizer package's 4,626
// reference vectors (singles and both sides of pairs), as the tokenizer
// reads them (tokenizer.Clean).
func committedTexts(t *testing.T) []string {
	f, err := os.Open(filepath.Join("..", "..", "..", "testdata", "tokenizer", "minilm_vectors.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(gz)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var v struct{ A, B string }
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{v.A, v.B} {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				t.Fatal(err)
			}
			text := tokenizer.Clean(string(b))
			if !seen[text] {
				seen[text] = true
				out = append(out, text)
			}
		}
	}
	return out
}

// tokensRef is the ids transformers' GGUF tokenizer gives the committed
// texts (tools/gguf_reference.py tokens), committed.
var tokensRef = reftest.Suite{Golden: "testdata/gguf_tokens.golden", Tool: "gguf_reference.py",
	Imports: []string{"gguf", "transformers"}, Outputs: []string{"ids.json"}}

// TestTokenizerMatchesTransformers: the tokenizer.json built from
// SmolLM2's GGUF vocabulary gives the ids transformers' GGUF tokenizer
// gives on every committed tokenizer string (read from the golden file
// gguf_reference.py wrote, internal/reftest); with AppendEOS, EOS (id 2)
// ends every sequence.
func TestTokenizerMatchesTransformers(t *testing.T) {
	dir := t.TempDir()
	path := gguftest.SmolLM2(t, dir)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, eos := range []bool{false, true} {
		js, err := f.TokenizerJSON(TokenizerOptions{AppendEOS: eos})
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, "tokenizer.json")
		if eos {
			name = filepath.Join(dir, "tokenizer-eos.json")
		}
		if err := os.WriteFile(name, js, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	texts := committedTexts(t)
	ref := t.TempDir()
	reftest.WriteJSON(t, ref, map[string]any{"texts.json": texts})
	gguftest.WriteID(t, ref)
	suite := tokensRef
	suite.Args = func(dirs []string) []string {
		return []string{"tokens", path, filepath.Join(dirs[0], "texts.json"), filepath.Join(dirs[0], "ids.json")}
	}
	suite.Reference(t, []reftest.Case{{Name: "smollm2", Dir: ref}})
	var want [][]int64
	b, _ := os.ReadFile(filepath.Join(ref, "ids.json"))
	if err := json.Unmarshal(b, &want); err != nil || len(want) != len(texts) {
		t.Fatalf("reference ids: %v (%d lists for %d texts)", err, len(want), len(texts))
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	// The pure-Go tokenizer too, whatever the build's default.
	pure, err := tokenizer.LoadPure(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer pure.Close()
	for _, tok := range []*tokenizer.Tokenizer{tok, pure} {
		bad := 0
		for i, text := range texts {
			got := tok.IDs(text)
			if len(got) == 0 && len(want[i]) == 0 {
				continue
			}
			if !slices.Equal(got, want[i]) {
				if bad < 5 {
					t.Errorf("%s: %.60q: ids %v, transformers %v", tok.Implementation(), text, got[:min(len(got), 12)], want[i][:min(len(want[i]), 12)])
				}
				bad++
			}
		}
		t.Logf("%s: %d distinct texts of the committed vectors: %d differ", tok.Implementation(), len(texts), bad)
		if bad > 0 {
			t.Errorf("%s: %d of %d texts tokenised differently", tok.Implementation(), bad, len(texts))
		}
	}
	te, err := tokenizer.Load(filepath.Join(dir, "tokenizer-eos.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer te.Close()
	for i, text := range texts[:200] {
		if e := te.Encode(text, 0); !slices.Equal(e.IDs, append(slices.Clone(want[i]), 2)) {
			t.Errorf("with EOS, %.40q: %v, want %v and EOS", text, e.IDs, want[i])
			break
		}
	}
	if e := te.Encode("tides", 0); e.IDs[len(e.IDs)-1] != 2 || te.PadID() != 2 {
		t.Errorf("with EOS: %v, pad %d; want EOS (2) last and pad 2", e.IDs, te.PadID())
	}
}
