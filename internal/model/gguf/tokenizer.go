package gguf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// Token types of tokenizer.ggml.token_type (llama.cpp's llama_token_type:
// undefined 0, normal 1, unknown 2, control 3, user-defined 4, unused 5,
// byte 6). Control and user-defined tokens become added tokens; a type
// above byte is refused.
const (
	tokenControl     = 3
	tokenUserDefined = 4
	tokenByte        = 6
)

// TokenizerOptions say which special tokens the built tokenizer adds.
type TokenizerOptions struct {
	// AppendEOS appends the EOS token to every sequence (decoder
	// embedders pool the last token, which then is EOS). The file's
	// tokenizer.ggml.add_eos_token does too; BOS is added as
	// tokenizer.ggml.add_bos_token says (absent: no for gpt2, yes for
	// llama, as llama.cpp and transformers default).
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

// addedToken is an entry of tokenizer.json's added_tokens.
type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	Lstrip     bool   `json:"lstrip"`
	Rstrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// TokenizerJSON builds a Hugging Face tokenizer.json from the file's
// vocabulary (tokenizer.ggml.tokens, token_type, scores, merges, pre, the
// special token ids and add_* flags) for the two vocabulary kinds of
// tokenizer.ggml.model:
//
//   - gpt2: byte-level BPE (SmolLM2, Qwen, Llama-3): the file's merges, the
//     pre-tokenizer tokenizer.ggml.pre names, ByteLevel decoding.
//   - llama: SentencePiece BPE with byte fallback (Llama-2, Mistral,
//     TinyLlama), as transformers' GGUFLlamaConverter builds it: merges
//     from tokenizer.ggml.merges, else derived from tokenizer.ggml.scores;
//     spaces become ▁ and, unless tokenizer.ggml.add_space_prefix is false,
//     ▁ is prepended; characters outside the vocabulary fall back to their
//     <0xXX> byte tokens.
//
// Control and user-defined tokens become added (special, resp. plain)
// tokens, and so does the llama unknown token; the pad token is recorded as
// the padding id. Invariants: the vocabulary is the file's tokens, id for
// id, each once and valid UTF-8; llama merges join two tokens into a token
// (derived ones by construction, the file's checked); anything else — an
// unknown model or token type, a malformed list — is refused with an error
// naming the GGUF key.
func (g *File) TokenizerJSON(opts TokenizerOptions) ([]byte, error) {
	fail := func(format string, a ...any) ([]byte, error) {
		return nil, fmt.Errorf("gguf: %s: %s", g.path, fmt.Sprintf(format, a...))
	}
	mdl, _ := g.KV["tokenizer.ggml.model"].(string)
	if mdl != "gpt2" && mdl != "llama" {
		return fail("tokenizer.ggml.model %q is not supported (anna builds byte-level BPE tokenizers, model gpt2, and SentencePiece BPE tokenizers, model llama)", mdl)
	}
	var preJSON string
	if mdl == "gpt2" {
		pre, _ := g.KV["tokenizer.ggml.pre"].(string)
		if pre == "" {
			pre = "default"
		}
		var ok bool
		if preJSON, ok = preTokenizers[pre]; !ok {
			return fail("tokenizer.ggml.pre %q is not supported (anna knows default, gpt2, smollm)", pre)
		}
	}
	tokens, err := strList(g.KV["tokenizer.ggml.tokens"])
	if err != nil || len(tokens) == 0 {
		return fail("tokenizer.ggml.tokens: want a list of strings (%v)", err)
	}
	merges, err := strList(g.KV["tokenizer.ggml.merges"])
	if err != nil {
		return fail("tokenizer.ggml.merges: want a list of strings (%v)", err)
	}
	var ttypes []int
	if v, ok := g.KV["tokenizer.ggml.token_type"]; ok {
		l, ok := v.([]any)
		if !ok || len(l) != len(tokens) {
			return fail("tokenizer.ggml.token_type: want one type per token (%d tokens)", len(tokens))
		}
		ttypes = make([]int, len(l))
		for i, x := range l {
			tt, ok := asInt(x)
			if !ok || tt > tokenByte {
				return fail("tokenizer.ggml.token_type[%d] (token %q): unknown token type %v (want 0 to 6, llama.cpp's llama_token_type)", i, tokens[i], x)
			}
			ttypes[i] = tt
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
	flag := func(key string, def bool) (bool, error) {
		v, ok := g.KV[key]
		if !ok {
			return def, nil
		}
		b, ok := v.(bool)
		if !ok {
			return false, fmt.Errorf("%s is %v (%T), want a bool", key, v, v)
		}
		return b, nil
	}
	// llama.cpp (and transformers' LlamaTokenizerFast) add BOS to
	// SentencePiece vocabularies unless the file says otherwise.
	addBOS, err := flag("tokenizer.ggml.add_bos_token", mdl == "llama")
	if err != nil {
		return fail("%v", err)
	}
	addEOS, err := flag("tokenizer.ggml.add_eos_token", false)
	if err != nil {
		return fail("%v", err)
	}
	addEOS = addEOS || opts.AppendEOS
	if addEOS && !hasEOS {
		return fail("tokenizer.ggml.eos_token_id is missing, and the tokenizer should append EOS")
	}
	if addBOS && !hasBOS {
		return fail("tokenizer.ggml.add_bos_token is set (or defaults to true for model %s) but tokenizer.ggml.bos_token_id is missing", mdl)
	}

	addedTokens := []addedToken{}
	seen := make(map[string]int, len(tokens))
	for i, tok := range tokens {
		if !utf8.ValidString(tok) {
			return fail("tokenizer.ggml.tokens[%d] %q is not valid UTF-8", i, tok)
		}
		if j, dup := seen[tok]; dup {
			return fail("tokenizer.ggml.tokens: token %d %q repeats token %d", i, tok, j)
		}
		seen[tok] = i
		switch {
		case ttypes != nil && (ttypes[i] == tokenControl || ttypes[i] == tokenUserDefined):
			addedTokens = append(addedTokens, addedToken{ID: i, Content: tok, Special: ttypes[i] == tokenControl})
		case mdl == "llama" && hasUnk && i == unk:
			// transformers' LlamaTokenizerFast adds its unknown token.
			addedTokens = append(addedTokens, addedToken{ID: i, Content: tok, Special: true})
		case mdl == "llama" && ttypes == nil && ((hasBOS && i == bos) || (hasEOS && i == eos)):
			// Without token types GGUFLlamaConverter adds unk, BOS and EOS.
			addedTokens = append(addedTokens, addedToken{ID: i, Content: tok, Special: true})
		}
	}

	var pairs [][2]string
	switch {
	case mdl == "gpt2":
		for i, m := range merges {
			a, b, ok := strings.Cut(m, " ")
			if !ok || a == "" || b == "" {
				return fail("tokenizer.ggml.merges[%d] %q: want two tokens separated by a space", i, m)
			}
		}
	case merges != nil:
		pairs = make([][2]string, len(merges))
		for i, m := range merges {
			p := strings.Split(m, " ")
			if len(p) != 2 || p[0] == "" || p[1] == "" {
				return fail("tokenizer.ggml.merges[%d] %q: want two tokens separated by one space", i, m)
			}
			for _, t := range []string{p[0], p[1], p[0] + p[1]} {
				if _, ok := seen[t]; !ok {
					return fail("tokenizer.ggml.merges[%d] %q: %q is not in tokenizer.ggml.tokens", i, m, t)
				}
			}
			pairs[i] = [2]string{p[0], p[1]}
		}
	default:
		raw, ok := g.KV["tokenizer.ggml.scores"]
		if !ok {
			return fail("tokenizer.ggml.scores is missing: a llama (SentencePiece) vocabulary without tokenizer.ggml.merges needs the scores to rank its merges")
		}
		l, ok := raw.([]any)
		if !ok || len(l) != len(tokens) {
			return fail("tokenizer.ggml.scores: want one score per token (%d tokens)", len(tokens))
		}
		scores := make([]float64, len(l))
		for i, x := range l {
			f, ok := x.(float64)
			if !ok || math.IsNaN(f) {
				return fail("tokenizer.ggml.scores[%d] (token %q) is %v (%T), want a number", i, tokens[i], x, x)
			}
			scores[i] = f
		}
		pairs = spmMerges(tokens, scores, seen)
	}

	// The JSON by hand, in a stable order, vocabulary in id order.
	var buf bytes.Buffer
	w := func(s string) { buf.WriteString(s) }
	js := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err) // strings, ints and lists of them only
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
	prefix := true
	if mdl == "llama" {
		if prefix, err = flag("tokenizer.ggml.add_space_prefix", true); err != nil {
			return fail("%v", err)
		}
		w(`,"normalizer":{"type":"Sequence","normalizers":[`)
		if prefix {
			w(`{"type":"Prepend","prepend":"▁"},`)
		}
		w(`{"type":"Replace","pattern":{"String":" "},"content":"▁"}]},"pre_tokenizer":null`)
	} else {
		w(`,"normalizer":null,"pre_tokenizer":`)
		w(preJSON)
	}
	w(`,"post_processor":`)
	var single []string
	if addBOS {
		single = append(single, fmt.Sprintf(`{"SpecialToken":{"id":%s,"type_id":0}}`, mustJSON(tokens[bos])))
	}
	single = append(single, `{"Sequence":{"id":"A","type_id":0}}`)
	if addEOS {
		single = append(single, fmt.Sprintf(`{"SpecialToken":{"id":%s,"type_id":0}}`, mustJSON(tokens[eos])))
	}
	if !addBOS && !addEOS && mdl == "gpt2" {
		w(`{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true}`)
	} else {
		// Pairs: the same template around each sequence.
		pair := append([]string(nil), single...)
		for _, p := range single {
			pair = append(pair, strings.Replace(strings.Replace(p, `"A"`, `"B"`, 1), `"type_id":0`, `"type_id":1`, 1))
		}
		w(`{"type":"TemplateProcessing","single":[` + strings.Join(single, ",") + `],"pair":[` + strings.Join(pair, ",") + `],"special_tokens":{`)
		var special []int
		if addBOS {
			special = append(special, bos)
		}
		if addEOS && (!addBOS || eos != bos) {
			special = append(special, eos)
		}
		for i, id := range special {
			if i > 0 {
				w(",")
			}
			t := mustJSON(tokens[id])
			w(t + `:{"id":` + t + `,"ids":[` + fmt.Sprint(id) + `],"tokens":[` + t + `]}`)
		}
		w(`}}`)
	}
	if mdl == "llama" {
		// transformers' GGUFLlamaConverter order: bytes first, so the ▁ of
		// byte-fallback tokens becomes a space too; the prepended ▁ is
		// stripped again.
		w(`,"decoder":{"type":"Sequence","decoders":[{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Replace","pattern":{"String":"▁"},"content":" "}`)
		if prefix {
			w(`,{"type":"Strip","content":" ","start":1,"stop":0}`)
		}
		w(`]},`)
		// Characters outside the vocabulary become their UTF-8 bytes'
		// <0xXX> tokens; a byte without one is the unknown token.
		w(`"model":{"type":"BPE","dropout":null,"unk_token":`)
		if hasUnk {
			w(mustJSON(tokens[unk]))
		} else {
			w(`null`)
		}
		w(`,"continuing_subword_prefix":null,"end_of_word_suffix":null,"fuse_unk":true,"byte_fallback":true,"ignore_merges":false,"vocab":{`)
	} else {
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
	}
	for i, tok := range tokens {
		if i > 0 {
			w(",")
		}
		js(tok)
		w(":")
		js(i)
	}
	w(`},"merges":`)
	if mdl == "llama" {
		// Pairs, not "a b" strings: a SentencePiece piece may hold a space.
		js(pairs)
	} else {
		js(merges)
	}
	w("}}\n")
	return buf.Bytes(), nil
}

// spmMerges derives BPE merges from SentencePiece scores exactly as
// transformers' GGUFTokenizerSkeleton does: every split of a token (at a
// character boundary) into two tokens is a merge; a token's splits are
// ordered by their halves' scores, high first; then all merges by the
// merged token's score, high first, ties kept in token order.
func spmMerges(tokens []string, scores []float64, ids map[string]int) [][2]string {
	type merge struct {
		l, r  string
		score float64
	}
	score := func(t string) float64 { return scores[ids[t]] }
	var all []merge
	for i, tok := range tokens {
		var local []merge
		for k := range tok { // character boundaries, as Python slices
			if k == 0 {
				continue
			}
			l, rt := tok[:k], tok[k:]
			if _, ok := ids[l]; !ok {
				continue
			}
			if _, ok := ids[rt]; !ok {
				continue
			}
			local = append(local, merge{l, rt, scores[i]})
		}
		slices.SortStableFunc(local, func(a, b merge) int {
			if c := cmpDesc(score(a.l), score(b.l)); c != 0 {
				return c
			}
			return cmpDesc(score(a.r), score(b.r))
		})
		all = append(all, local...)
	}
	slices.SortStableFunc(all, func(a, b merge) int { return cmpDesc(a.score, b.score) })
	out := make([][2]string, len(all))
	for i, m := range all {
		out[i] = [2]string{m.l, m.r}
	}
	return out
}

// cmpDesc orders high before low.
func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
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
