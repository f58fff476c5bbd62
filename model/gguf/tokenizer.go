package gguf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Token types of tokenizer.ggml.token_type (llama.cpp's llama_token_type)
// that become added tokens.
const (
	tokenControl     = 3
	tokenUserDefined = 4
)

// TokenizerOptions say which special tokens the built tokenizer adds.
type TokenizerOptions struct {
	// AppendEOS appends the EOS token to every sequence (decoder
	// embedders pool the last token, which then is EOS). BOS is added when
	// the file says tokenizer.ggml.add_bos_token.
	AppendEOS bool
}

// pre-tokenizers for tokenizer.ggml.pre values of byte-level BPE
// vocabularies (llama.cpp's llama-vocab.cpp names them): Hugging Face
// tokenizers JSON.
var preTokenizers = map[string]string{
	// GPT-2's regex over bytes.
	"default": `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}`,
	"gpt2":    `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}`,
	// SmolLM: llama.cpp splits off every \p{N} character first, then
	// applies GPT-2's regex; transformers' GGUF tokenizer (the reference
	// TestTokenizerMatchesTransformers holds anna to) applies GPT-2's regex
	// alone. The two differ only where the vocabulary merges a space with
	// a numeric character (" ½"; SmolLM2 has no such merge for 0-9); anna
	// follows transformers.
	"smollm": `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}`,
}

// TokenizerJSON builds a Hugging Face tokenizer.json from the file's
// vocabulary (tokenizer.ggml.tokens, token_type, merges, pre, the special
// token ids), for byte-level BPE vocabularies (tokenizer.ggml.model gpt2).
// Control and user-defined tokens become added (special) tokens; the pad
// token is recorded as the padding id. Anything else is refused, naming the
// field.
func (g *File) TokenizerJSON(opts TokenizerOptions) ([]byte, error) {
	fail := func(format string, a ...any) ([]byte, error) {
		return nil, fmt.Errorf("gguf: %s: %s", g.path, fmt.Sprintf(format, a...))
	}
	mdl, _ := g.KV["tokenizer.ggml.model"].(string)
	if mdl != "gpt2" {
		return fail("tokenizer.ggml.model %q is not supported (anna builds byte-level BPE tokenizers, model gpt2)", mdl)
	}
	pre, _ := g.KV["tokenizer.ggml.pre"].(string)
	if pre == "" {
		pre = "default"
	}
	preJSON, ok := preTokenizers[pre]
	if !ok {
		return fail("tokenizer.ggml.pre %q is not supported (anna knows default, gpt2, smollm)", pre)
	}
	tokens, err := strList(g.KV["tokenizer.ggml.tokens"])
	if err != nil || len(tokens) == 0 {
		return fail("tokenizer.ggml.tokens: want a list of strings (%v)", err)
	}
	merges, err := strList(g.KV["tokenizer.ggml.merges"])
	if err != nil {
		return fail("tokenizer.ggml.merges: want a list of strings (%v)", err)
	}
	var ttypes []any
	if v, ok := g.KV["tokenizer.ggml.token_type"]; ok {
		if ttypes, ok = v.([]any); !ok || len(ttypes) != len(tokens) {
			return fail("tokenizer.ggml.token_type: want one type per token (%d tokens)", len(tokens))
		}
	}
	id := func(key string) (int, bool, error) {
		if _, ok := g.KV[key]; !ok {
			return 0, false, nil
		}
		n, err := g.Int(key)
		if err != nil {
			return 0, false, err
		}
		if n >= len(tokens) {
			return 0, false, fmt.Errorf("%s %d is no token id (vocabulary of %d)", key, n, len(tokens))
		}
		return n, true, nil
	}
	eos, hasEOS, err := id("tokenizer.ggml.eos_token_id")
	if err != nil {
		return fail("%v", err)
	}
	bos, hasBOS, err := id("tokenizer.ggml.bos_token_id")
	if err != nil {
		return fail("%v", err)
	}
	pad, hasPad, err := id("tokenizer.ggml.padding_token_id")
	if err != nil {
		return fail("%v", err)
	}
	unk, hasUnk, err := id("tokenizer.ggml.unknown_token_id")
	if err != nil {
		return fail("%v", err)
	}
	if opts.AppendEOS && !hasEOS {
		return fail("tokenizer.ggml.eos_token_id is missing, and the tokenizer should append EOS")
	}
	addBOS, _ := g.KV["tokenizer.ggml.add_bos_token"].(bool)
	if addBOS && !hasBOS {
		return fail("tokenizer.ggml.add_bos_token is set but tokenizer.ggml.bos_token_id is missing")
	}

	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		Lstrip     bool   `json:"lstrip"`
		Rstrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	addedTokens := []added{}
	vocab := make([]string, 0, len(tokens))
	seen := map[string]int{}
	for i, tok := range tokens {
		if j, dup := seen[tok]; dup {
			return fail("tokenizer.ggml.tokens: token %d %q repeats token %d", i, tok, j)
		}
		seen[tok] = i
		vocab = append(vocab, tok)
		if ttypes != nil {
			tt, _ := asInt(ttypes[i])
			if tt == tokenControl || tt == tokenUserDefined {
				addedTokens = append(addedTokens, added{ID: i, Content: tok, Special: tt == tokenControl})
			}
		}
	}
	for i, m := range merges {
		a, b, ok := strings.Cut(m, " ")
		if !ok || a == "" || b == "" {
			return fail("tokenizer.ggml.merges[%d] %q: want two tokens separated by a space", i, m)
		}
	}

	// The JSON by hand, in a stable order, vocabulary in id order.
	var buf bytes.Buffer
	w := func(s string) { buf.WriteString(s) }
	js := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err) // strings and ints only
		}
		buf.Write(b)
	}
	w(`{"version":"1.0","truncation":null,`)
	if hasPad {
		w(`"padding":{"strategy":"BatchLongest","direction":"Right","pad_to_multiple_of":null,"pad_id":`)
		js(pad)
		w(`,"pad_type_id":0,"pad_token":`)
		js(tokens[pad])
		w(`},`)
	} else {
		w(`"padding":null,`)
	}
	w(`"added_tokens":`)
	js(addedTokens)
	w(`,"normalizer":null,"pre_tokenizer":`)
	w(preJSON)
	w(`,"post_processor":`)
	var single []string
	special := map[int]bool{}
	if addBOS {
		single = append(single, fmt.Sprintf(`{"SpecialToken":{"id":%s,"type_id":0}}`, mustJSON(tokens[bos])))
		special[bos] = true
	}
	single = append(single, `{"Sequence":{"id":"A","type_id":0}}`)
	if opts.AppendEOS {
		single = append(single, fmt.Sprintf(`{"SpecialToken":{"id":%s,"type_id":0}}`, mustJSON(tokens[eos])))
		special[eos] = true
	}
	if len(special) == 0 {
		w(`{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true}`)
	} else {
		// Pairs: the same template around each sequence.
		pair := append([]string(nil), single...)
		for _, p := range single {
			pair = append(pair, strings.Replace(strings.Replace(p, `"A"`, `"B"`, 1), `"type_id":0`, `"type_id":1`, 1))
		}
		w(`{"type":"TemplateProcessing","single":[` + strings.Join(single, ",") + `],"pair":[` + strings.Join(pair, ",") + `],"special_tokens":{`)
		first := true
		for _, id := range []int{bos, eos} {
			if !special[id] {
				continue
			}
			if !first {
				w(",")
			}
			first = false
			special[id] = false
			t := mustJSON(tokens[id])
			w(t + `:{"id":` + t + `,"ids":[` + fmt.Sprint(id) + `],"tokens":[` + t + `]}`)
		}
		w(`}}`)
	}
	w(`,"decoder":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true},`)
	// A byte missing from the vocabulary (SmolLM2 lacks a few control
	// characters) is the unknown token, consecutive ones fused, as
	// transformers builds it; without an unknown token it is dropped.
	w(`"model":{"type":"BPE","dropout":null,"unk_token":`)
	if hasUnk {
		w(mustJSON(tokens[unk]) + `,"fuse_unk":true,`)
	} else {
		w(`null,"fuse_unk":false,`)
	}
	w(`"continuing_subword_prefix":null,"end_of_word_suffix":null,"byte_fallback":false,"ignore_merges":false,"vocab":{`)
	for i, tok := range vocab {
		if i > 0 {
			w(",")
		}
		js(tok)
		w(":")
		js(i)
	}
	w(`},"merges":`)
	js(merges)
	w("}}\n")
	return buf.Bytes(), nil
}

func mustJSON(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func strList(v any) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%T", v)
	}
	out := make([]string, len(l))
	for i, x := range l {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("element %d is %T", i, x)
		}
		out[i] = s
	}
	return out, nil
}

func asInt(v any) (int, bool) {
	switch x := v.(type) {
	case uint64:
		return int(x), x < 1<<31
	case int64:
		return int(x), x >= 0 && x < 1<<31
	}
	return 0, false
}
