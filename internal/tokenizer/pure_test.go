package tokenizer

import (
	"slices"
	"testing"
)

func loadMiniLMPure(t testing.TB) *Tokenizer {
	t.Helper()
	tk, err := LoadPure(miniLMPath(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tk.Close() })
	return tk
}

// TestPureReferenceVectors holds the pure-Go implementation to the
// committed Python vectors in every build (with cgo on, Load picks the
// native one).
func TestPureReferenceVectors(t *testing.T) {
	tk := loadMiniLMPure(t)
	if got := tk.Implementation(); got != "pure" {
		t.Fatalf("LoadPure gave the %s implementation", got)
	}
	checkVectors(t, tk)
}

// BenchmarkEncode encodes the committed vectors' single texts (3,415, many
// of them long or odd) with each implementation the build has: native
// (cgo) and pure with cgo on, pure alone without.
func BenchmarkEncode(b *testing.B) {
	var texts []string
	n := 0
	for _, v := range readVectors(b) {
		if v.Kind == "single" {
			texts = append(texts, cleanText(unb64(b, v.A)))
			n += len(texts[len(texts)-1])
		}
	}
	seen := map[string]bool{}
	for _, load := range []func(string) (*Tokenizer, error){Load, LoadPure} {
		tk, err := load(miniLMPath(b))
		if err != nil {
			b.Fatal(err)
		}
		name := tk.Implementation()
		if seen[name] {
			tk.Close()
			continue
		}
		seen[name] = true
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				for _, s := range texts {
					tk.Encode(s, 0)
				}
			}
		})
		tk.Close()
	}
}

// TestPureMatchesNative compares the two implementations where the build
// has both: windows (token offsets) of the committed single texts without
// a length limit (586: each text appears under several limits), and
// decoding of each text's ids and of id lists around the special tokens.
func TestPureMatchesNative(t *testing.T) {
	nat, pure := loadMiniLM(t), loadMiniLMPure(t)
	if nat.Implementation() != "native" {
		t.Skip("no native implementation in this build (cgo off or -tags annapure)")
	}
	bad := 0
	texts := 0
	for _, v := range readVectors(t) {
		if v.Kind != "single" || v.MaxLen != 0 {
			continue
		}
		texts++
		text := unb64(t, v.A)
		for _, sz := range [][2]int{{16, 8}, {5, 5}} {
			nc, nw := nat.Windows(text, sz[0], sz[1])
			pc, pw := pure.Windows(text, sz[0], sz[1])
			if nc != pc || !slices.Equal(nw, pw) {
				if bad < 5 {
					t.Errorf("Windows(%.60q, %d, %d): pure %v, native %v", text, sz[0], sz[1], pw, nw)
				}
				bad++
			}
		}
		ids := nat.Encode(text, 0).IDs
		for _, skip := range []bool{false, true} {
			if p, n := pure.Decode(ids, skip), nat.Decode(ids, skip); p != n {
				if bad < 5 {
					t.Errorf("Decode(%v, %v): pure %q, native %q", ids[:min(len(ids), 12)], skip, p, n)
				}
				bad++
			}
		}
	}
	for _, ids := range [][]int64{{}, {101, 102}, {0, 100, 101, 102, 103}, {7592, 1012, 2003, 29621, 2015}, {2123, 1005, 1056, 999999}} {
		for _, skip := range []bool{false, true} {
			if p, n := pure.Decode(ids, skip), nat.Decode(ids, skip); p != n {
				t.Errorf("Decode(%v, %v): pure %q, native %q", ids, skip, p, n)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d texts' windows or decodings differ", bad, texts)
	}
}

// TestGPT2Split checks the hand-written GPT-2 regex on the cases its
// look-ahead decides (white space before a word keeps its last space for
// the word; trailing white space stays whole) and the contractions.
func TestGPT2Split(t *testing.T) {
	for in, want := range map[string][]string{
		"Hello world":        {"Hello", " world"},
		"  hi":               {" ", " hi"},
		"a  \n b":            {"a", "  \n", " b"},
		"it's 12ab!! ?x":     {"it", "'s", " 12", "ab", "!!", " ?", "x"},
		"x   ":               {"x", "   "},
		"\tfoo\n\nbar":       {"\t", "foo", "\n", "\n", "bar"},
		"we'll 'LL ''ve":     {"we", "'ll", " '", "LL", " ''", "ve"},
		"½ caf\u00e9 \u0661": {"½", " café", " \u0661"},
		"":                   nil,
	} {
		var got []string
		for _, w := range gpt2Split(toNchars(in, 0)) {
			got = append(got, runesString(w))
		}
		if !slices.Equal(got, want) {
			t.Errorf("gpt2Split(%q) = %q, want %q", in, got, want)
		}
	}
}
