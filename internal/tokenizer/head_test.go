package tokenizer

import (
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/gguf"
	"github.com/anna-search/anna/internal/model/gguf/gguftest"
)

var headToks struct {
	once sync.Once
	toks map[string]*Tokenizer
	dir  string
}

// headTokenizers are a WordPiece tokenizer (the default model's) and a
// byte-level BPE one (SmolLM2's, from its GGUF), where installed, loaded
// once for the package's tests.
func headTokenizers(t *testing.T) map[string]*Tokenizer {
	headToks.once.Do(func() {
		headToks.toks = map[string]*Tokenizer{}
		if tk, err := Load(filepath.Join(home.DefaultModel(), "tokenizer.json")); err == nil {
			headToks.toks["wordpiece"] = tk
		}
		if _, err := os.Stat(filepath.Join(home.DownloadsDir(), gguftest.SmolLM2Wheel)); err != nil {
			return
		}
		dir, err := os.MkdirTemp("", "anna-head-test")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		f, err := gguf.Open(gguftest.SmolLM2(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		js, err := f.TokenizerJSON(gguf.TokenizerOptions{})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "tokenizer.json")
		if err := os.WriteFile(path, js, 0o644); err != nil {
			t.Fatal(err)
		}
		tk, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		headToks.toks["byte-level BPE"] = tk
	})
	if len(headToks.toks) == 0 {
		t.Skip("no tokenizer installed (make setup)")
	}
	return headToks.toks
}

// longText is a text of about n bytes of one kind.
func longText(rng *rand.Rand, kind string, n int) string {
	words := []string{"graph", "search", "tokenizer", "naïve", "東京", "x", "supercalifragilistic", "3.14", "don't", "!!", "\t", "\n\n", "  "}
	var b strings.Builder
	for b.Len() < n {
		switch kind {
		case "words":
			b.WriteString(words[rng.Intn(len(words))])
			b.WriteString(" ")
		case "no space": // punctuation and short words, never white space
			b.WriteString(words[rng.Intn(4)])
			b.WriteString([]string{",", ".", "-", "/"}[rng.Intn(4)])
		case "long words": // words of 50 to 300 letters between spaces
			b.WriteString(strings.Repeat(string(rune('a'+rng.Intn(26))), 50+rng.Intn(250)))
			b.WriteString(" ")
		case "cjk":
			b.WriteString(words[4])
		}
	}
	return b.String()
}

// TestHeadIsExact: a truncating Encode, EncodePair and EncodePrompt of a
// long text read only its head, and give what reading the whole texts
// gives (the template applied to their whole ids, truncated).
func TestHeadIsExact(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for name, tk := range headTokenizers(t) {
		for _, kind := range []string{"words", "no space", "long words", "cjk"} {
			for _, size := range []int{3000, 50000} {
				text, other := longText(rng, kind, size), longText(rng, "words", 200+rng.Intn(20000))
				more := text + " more"
				raw := map[string][]int64{text: tk.raw(text), other: tk.raw(other), more: tk.raw(more)}
				for _, maxLen := range []int{8, 512} {
					got, want := tk.Encode(text, maxLen).IDs, tk.post.apply(raw[text], nil, false, maxLen).IDs
					if !slices.Equal(got, want) {
						t.Errorf("%s, %s text of %d bytes, Encode to %d: differs from the whole text's", name, kind, len(text), maxLen)
					}
					for _, pair := range [][2]string{{text, other}, {other, text}, {text, more}, {more, text}} {
						got, want := tk.EncodePair(pair[0], pair[1], maxLen).IDs, tk.post.apply(raw[pair[0]], raw[pair[1]], true, maxLen).IDs
						if !slices.Equal(got, want) {
							t.Errorf("%s, %s text of %d bytes, EncodePair to %d: differs from the whole texts'", name, kind, len(text), maxLen)
						}
					}
					got = tk.EncodePrompt([]int64{1, 2}, text, []int64{3}, maxLen).IDs
					want = append(append([]int64{1, 2}, raw[text][:min(len(raw[text]), max(maxLen-3, 0))]...), 3)
					if !slices.Equal(got, want) {
						t.Errorf("%s, %s text of %d bytes, EncodePrompt to %d: differs from the whole text's", name, kind, len(text), maxLen)
					}
				}
			}
		}
	}
}

// TestHeadCostBounded: a truncating Encode of a 16 MB text costs what its
// head costs, not what the text costs (it took the Rust tokenizer 15 to
// 45 s). Timed against reading 64 KB, with a generous factor: this catches
// reading the whole text, not a slow machine.
func TestHeadCostBounded(t *testing.T) {
	for name, tk := range headTokenizers(t) {
		for _, kind := range []string{"words", "no space", "long words"} {
			rng := rand.New(rand.NewSource(2))
			small := longText(rng, kind, 64<<10)
			big := strings.Repeat(small, 256) // 16 MB
			t0 := time.Now()
			tk.IDs(small)
			ref := time.Since(t0)
			t0 = time.Now()
			e := tk.Encode(big, 512)
			took := time.Since(t0)
			if len(e.IDs) == 0 || took > 20*ref+100*time.Millisecond {
				t.Errorf("%s, %s: Encode of 16 MB to 512 tokens took %v (reading 64 KB whole: %v)", name, kind, took, ref)
			}
		}
		aaa := strings.Repeat("a", 16<<20) // one word of 16 MB: read by its first 64 bytes per token
		t0 := time.Now()
		tk.Encode(aaa, 512)
		if took := time.Since(t0); took > 5*time.Second {
			t.Errorf("%s: one 16 MB word: %v", name, took)
		}
	}
}
