package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/anna-search/anna/internal/home"
)

var fuzzTok struct {
	once       sync.Once
	tk         *Tokenizer
	vocab      int64
	cls, sep   int64
	path, skip string
}

// fuzzTokenizer loads the default model's tokenizer once per process, with
// its vocabulary size (model.vocab and added_tokens of tokenizer.json).
func fuzzTokenizer(t *testing.T) (*Tokenizer, int64) {
	t.Helper()
	f := &fuzzTok
	f.once.Do(func() {
		f.path = filepath.Join(home.DefaultModel(), "tokenizer.json")
		data, err := os.ReadFile(f.path)
		if err != nil {
			f.skip = "default model's tokenizer.json absent (run `make setup`): " + err.Error()
			return
		}
		var file struct {
			Model struct {
				Vocab map[string]int64 `json:"vocab"`
			} `json:"model"`
			AddedTokens []struct {
				ID int64 `json:"id"`
			} `json:"added_tokens"`
		}
		if err := json.Unmarshal(data, &file); err != nil {
			f.skip = err.Error()
			return
		}
		for _, id := range file.Model.Vocab {
			f.vocab = max(f.vocab, id+1)
		}
		for _, a := range file.AddedTokens {
			f.vocab = max(f.vocab, a.ID+1)
		}
		if f.tk, err = Load(f.path); err != nil {
			f.skip = err.Error()
			return
		}
		e := f.tk.Encode("", 0)
		f.cls, f.sep = e.IDs[0], e.IDs[1]
	})
	if f.skip != "" {
		t.Skip(f.skip)
	}
	return f.tk, f.vocab
}

// FuzzEncode checks Encode and EncodePair on the default model (BERT
// template: [CLS] A [SEP] and [CLS] A [SEP] B [SEP]) for any texts and
// limit: ids, type ids and mask have one length, ids lie in the vocabulary,
// the mask is all 1, type ids are 0 for [CLS] A [SEP] and 1 for B [SEP]; the
// output never exceeds the limit (or the special tokens alone, when the
// limit cannot hold them); truncation keeps a prefix of each text's
// unlimited tokens and uses the whole budget; in a pair it is longest-first:
// a text is cut only while it is at least as long as the other, so a cut
// text keeps at least the other's kept length minus one.
func FuzzEncode(f *testing.F) {
	f.Fuzz(func(t *testing.T, a, b string, maxLen int) {
		tk, vocab := fuzzTokenizer(t)
		maxLen %= 1024
		check := func(what string, e Encoding) {
			if len(e.IDs) != len(e.TypeIDs) || len(e.IDs) != len(e.Mask) {
				t.Fatalf("%s: %d ids, %d type ids, %d mask", what, len(e.IDs), len(e.TypeIDs), len(e.Mask))
			}
			for i, id := range e.IDs {
				if id < 0 || id >= vocab || e.Mask[i] != 1 {
					t.Fatalf("%s: id %d (vocab %d), mask %d at %d", what, id, vocab, e.Mask[i], i)
				}
			}
		}
		// Unlimited single encodings: [CLS] body [SEP], type ids 0.
		body := func(s string) []int64 {
			e := tk.Encode(s, 0)
			check("Encode unlimited", e)
			n := len(e.IDs)
			if n < 2 || e.IDs[0] != fuzzTok.cls || e.IDs[n-1] != fuzzTok.sep || slices.ContainsFunc(e.TypeIDs, func(v int64) bool { return v != 0 }) {
				t.Fatalf("Encode(%q, 0) = %v / %v", s, e.IDs, e.TypeIDs)
			}
			return e.IDs[1 : n-1]
		}
		fa, fb := body(a), body(b)

		e := tk.Encode(a, maxLen)
		check("Encode", e)
		n := len(e.IDs)
		if n < 2 || e.IDs[0] != fuzzTok.cls || e.IDs[n-1] != fuzzTok.sep || !slices.Equal(e.IDs[1:n-1], fa[:n-2]) {
			t.Fatalf("Encode(%q, %d) = %v, not [CLS] + a prefix of %v + [SEP]", a, maxLen, e.IDs, fa)
		}
		if want := len(fa) + 2; maxLen > 0 && want > maxLen {
			want = max(maxLen, 2)
			if n != want {
				t.Fatalf("Encode(%q, %d): %d tokens, want %d", a, maxLen, n, want)
			}
		} else if n != want {
			t.Fatalf("Encode(%q, %d): %d tokens, want all %d", a, maxLen, n, want)
		}

		p := tk.EncodePair(a, b, maxLen)
		check("EncodePair", p)
		n = len(p.IDs)
		// Type ids are 0 for [CLS] A [SEP], then 1 for B [SEP]. (A text may
		// hold special tokens itself: "[SEP]" in the text is the [SEP]
		// token, as in Hugging Face, so ids alone cannot split the pair.)
		i := slices.Index(p.TypeIDs, 1) - 1 // A's [SEP]
		if n < 3 || i < 1 || p.IDs[0] != fuzzTok.cls || p.IDs[i] != fuzzTok.sep || p.IDs[n-1] != fuzzTok.sep ||
			slices.ContainsFunc(p.TypeIDs[:i+1], func(v int64) bool { return v != 0 }) ||
			slices.ContainsFunc(p.TypeIDs[i+1:], func(v int64) bool { return v != 1 }) {
			t.Fatalf("EncodePair(%q, %q, %d) = %v / %v", a, b, maxLen, p.IDs, p.TypeIDs)
		}
		ka, kb := p.IDs[1:i], p.IDs[i+1:n-1]
		if len(ka) > len(fa) || !slices.Equal(ka, fa[:len(ka)]) || len(kb) > len(fb) || !slices.Equal(kb, fb[:len(kb)]) {
			t.Fatalf("EncodePair(%q, %q, %d) = %v: not prefixes of %v and %v", a, b, maxLen, p.IDs, fa, fb)
		}
		total := len(fa) + len(fb) + 3
		switch {
		case maxLen <= 0 || total <= maxLen:
			if n != total {
				t.Fatalf("EncodePair(%q, %q, %d): %d tokens, want all %d", a, b, maxLen, n, total)
			}
		default:
			if n != max(maxLen, 3) {
				t.Fatalf("EncodePair(%q, %q, %d): %d tokens, want %d", a, b, maxLen, n, max(maxLen, 3))
			}
		}
		if len(ka) < len(fa) && len(ka) < len(kb)-1 || len(kb) < len(fb) && len(kb) < len(ka)-1 {
			t.Fatalf("EncodePair(%q, %q, %d): kept %d of %d and %d of %d: not longest-first", a, b, maxLen, len(ka), len(fa), len(kb), len(fb))
		}
	})
}
