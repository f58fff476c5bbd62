package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/internal/fuzzcheck"
)

// Small tokenizer.json files of the kinds anna reads (WordPiece with
// BERT's normalizer and template; byte-level BPE), FuzzLoad's seeds.
const (
	seedWordPiece = `{"version":"1.0","truncation":null,"padding":null,"added_tokens":[{"id":0,"content":"[PAD]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},{"id":1,"content":"[UNK]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},{"id":2,"content":"[CLS]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},{"id":3,"content":"[SEP]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],"normalizer":{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true},"pre_tokenizer":{"type":"BertPreTokenizer"},"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}}],"pair":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}},{"Sequence":{"id":"B","type_id":1}},{"SpecialToken":{"id":"[SEP]","type_id":1}}],"special_tokens":{"[CLS]":{"id":"[CLS]","ids":[2],"tokens":["[CLS]"]},"[SEP]":{"id":"[SEP]","ids":[3],"tokens":["[SEP]"]}}},"decoder":{"type":"WordPiece","prefix":"##","cleanup":true},"model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":100,"vocab":{"[PAD]":0,"[UNK]":1,"[CLS]":2,"[SEP]":3,"hello":4,"world":5,"##s":6,"a":7,"graph":8,"##ing":9}}}`
	seedBPE       = `{"version":"1.0","truncation":null,"padding":null,"added_tokens":[{"id":0,"content":"<|endoftext|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],"normalizer":null,"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true},"post_processor":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true},"decoder":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true},"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":"","end_of_word_suffix":"","fuse_unk":false,"byte_fallback":false,"vocab":{"<|endoftext|>":0,"h":1,"e":2,"l":3,"o":4,"he":5,"ll":6,"hell":7,"hello":8,"Ġ":9,"w":10,"r":11,"d":12},"merges":["h e","l l","he ll","hell o"]}}`
)

// FuzzLoad: the tokenizer.json reader, both implementations, on any file:
// Load fails with an error naming the file, or gives a tokenizer that
// encodes a few texts within the limit asked, ids, type ids and mask of
// one length.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(seedWordPiece))
	f.Add([]byte(seedBPE))
	f.Add([]byte(`{"model": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "tokenizer.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for i, load := range []func(string) (*Tokenizer, error){Load, LoadPure} {
			var tk *Tokenizer
			var err error
			fuzzcheck.Within(t, 10*time.Second, []string{"Load", "LoadPure"}[i], func() { tk, err = load(path) })
			if err != nil {
				if !strings.Contains(err.Error(), path) {
					t.Fatalf("error %q does not name the file", err)
				}
				continue
			}
			fuzzcheck.Within(t, 10*time.Second, "encoding", func() { encodeSome(t, tk) })
			tk.Close()
		}
	})
}

// encodeSome encodes a few texts with tk, checking the encodings' shape.
func encodeSome(t *testing.T, tk *Tokenizer) {
	for _, s := range []string{"hello worlds", "", "Graphing a HELLO!", strings.Repeat("hello ", 300)} {
		for _, limit := range []int{0, 5, 64} {
			e := tk.Encode(s, limit)
			if len(e.IDs) != len(e.TypeIDs) || len(e.IDs) != len(e.Mask) {
				t.Fatalf("Encode(%q, %d): %d ids, %d type ids, %d mask", s, limit, len(e.IDs), len(e.TypeIDs), len(e.Mask))
			}
			p := tk.EncodePair(s, "a world", limit)
			if len(p.IDs) != len(p.Mask) {
				t.Fatalf("EncodePair(%q, %d): %d ids, %d mask", s, limit, len(p.IDs), len(p.Mask))
			}
		}
		tk.Decode(tk.IDs(s), true)
	}
}
