package tokenizer

import (
	"encoding/base64"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// charsmap is a Precompiled normalizer's charsmap as spm_precompiled
// reads it: a darts double array of 512 units whose one key, "a", leads
// to the normalized string at index leaf of norm; the units set by set
// replace the array's.
func charsmap(norm string, leaf uint32, set map[int]uint32) string {
	arr := make([]uint32, 512)
	// The root's offset is 0, so byte c reaches unit c; unit 'a' is a
	// leaf labelled 'a' whose offset (256: bit 9 set, 1<<10) leads to
	// unit 'a'^256, which holds the index into the strings.
	arr['a'] = 'a' | 1<<8 | 1<<9 | 1<<10
	arr['a'^256] = leaf
	for i, u := range set {
		arr[i] = u
	}
	b := binary.LittleEndian.AppendUint32(nil, uint32(4*len(arr)))
	for _, u := range arr {
		b = binary.LittleEndian.AppendUint32(b, u)
	}
	return base64.StdEncoding.EncodeToString(append(b, norm...))
}

func precompiledTokenizer(normalizer string) string {
	return `{"normalizer": ` + normalizer + `, "pre_tokenizer": {"type": "WhitespaceSplit"},
 "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
  "vocab": {"[UNK]": 0, "a": 1, "b": 2, "é": 3}}}`
}

// TestNativeRefusesWhatWouldAbort: inputs that the Rust tokenizers crate
// panics on, across a C boundary that cannot unwind (the process would
// abort), are refused with an error naming the file and the field, or
// read safely; a well-formed Precompiled charsmap still loads and
// normalizes as the crate does.
func TestNativeRefusesWhatWouldAbort(t *testing.T) {
	load := func(js string) (*Tokenizer, string, error) {
		p := filepath.Join(t.TempDir(), "tokenizer.json")
		if err := os.WriteFile(p, []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
		tk, err := Load(p)
		return tk, p, err
	}
	bpe := func(decoder string) string {
		return `{"decoder": ` + decoder + `, "model": {"type": "BPE", "vocab": {"h": 0, "i": 1, "hi": 2}, "merges": ["h i"]}}`
	}
	for _, tc := range []struct{ name, js, want string }{
		{"precompiled not base64", precompiledTokenizer(`{"type": "Precompiled", "precompiled_charsmap": "%%%"}`), `["normalizer"]: Precompiled normalizer: precompiled_charsmap: illegal base64`},
		{"precompiled missing", precompiledTokenizer(`{"type": "Sequence", "normalizers": [{"type": "Precompiled"}]}`), `["normalizer"]["normalizers"][0]: Precompiled normalizer without`},
		{"precompiled short", precompiledTokenizer(`{"type": "Precompiled", "precompiled_charsmap": "AAAB"}`), "shorter than its header"},
		{"precompiled units past the end", precompiledTokenizer(`{"type": "Precompiled", "precompiled_charsmap": "` + base64.StdEncoding.EncodeToString([]byte{64, 0, 0, 0, 1, 2, 3, 4}) + `"}`), "declares 16 trie units, holds 1"},
		{"precompiled trie past the array", precompiledTokenizer(`{"type": "Precompiled", "precompiled_charsmap": "` + charsmap("b\x00", 0, map[int]uint32{0: 2<<10 | 1<<9}) + `"}`), "reaches past the array"},
		{"precompiled leaf mid-character", precompiledTokenizer(`{"type": "Precompiled", "precompiled_charsmap": "` + charsmap("é\x00", 1, nil) + `"}`), "leaf points at byte 1 of 3"},
		{"precompiled leaf past the strings", precompiledTokenizer(`{"type": "Precompiled", "precompiled_charsmap": "` + charsmap("b\x00", 9, nil) + `"}`), "leaf points at byte 9 of 2"},
		{"number out of range", bpe(`{"type": "ByteLevel", "x": 1e999}`), `["decoder"]["x"]: number 1e999 out of range`},
		{"deep", bpe(strings.Repeat(`{"k": `, 5000) + `1e999` + strings.Repeat(`}`, 5000)), `["decoder"]["k"]["k"]["k"][…4993 levels…]["k"]["k"]["k"]["k"]: number 1e999`},
		{"long key", bpe(`{"type": "ByteLevel", "` + strings.Repeat("x", 1<<20) + `": 1e999}`), `["decoder"]["xxxx`},
		{"lone surrogate", bpe(`{"type": "ByteLevel", "add_prefix_space\ud800": true}`), ""},
		{"not UTF-8", bpe("{\"type\": \"ByteLevel\", \"add_pre\xa7fix_space\": true}"), ""},
	} {
		tk, path, err := load(tc.js)
		if tc.want == "" { // read safely, the bad bytes as U+FFFD
			if err != nil && !strings.Contains(err.Error(), path) {
				t.Errorf("%s: error %q does not name the file", tc.name, err)
			}
			if err == nil {
				tk.Close()
			}
			continue
		}
		if err == nil {
			tk.Close()
			t.Errorf("%s: loaded", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) || len(err.Error()) > 1024 {
			t.Errorf("%s: error %.2000q (%d bytes), want the file and %q in at most 1 KiB", tc.name, err, len(err.Error()), tc.want)
		}
	}
	// A well-formed charsmap: "a" normalized to the string at its leaf.
	for _, tc := range []struct {
		norm string
		leaf uint32
		want []int64
	}{{"b\x00", 0, []int64{2}}, {"xé\x00", 1, []int64{3}}} {
		tk, _, err := load(precompiledTokenizer(`{"type": "Precompiled", "precompiled_charsmap": "` + charsmap(tc.norm, tc.leaf, nil) + `"}`))
		if err != nil {
			t.Fatalf("a well-formed charsmap: %v", err)
		}
		if got := tk.IDs("a"); !slices.Equal(got, tc.want) {
			t.Errorf("%q at %d: a → %v, want %v (%s)", tc.norm, tc.leaf, got, tc.want, tk.Implementation())
		}
		tk.Close()
	}
}
