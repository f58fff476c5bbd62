package gguf

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/model/gguf/gguftest"
	"github.com/anna-search/anna/internal/reftest"
)

// sameBits: equal bits, or both NaN (a NaN's payload may differ between
// numpy's conversion paths).
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// The types the random blocks of TestGGUFDequantizeMatchesGGUFPy cover.
var refTypes = []Type{F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K, Q6_K}

// gguf-py's dequantization (tools/gguf_reference.py blocks and file),
// committed.
var (
	blocksRef = reftest.Suite{Golden: "testdata/gguf_blocks.golden", Tool: "gguf_reference.py", Imports: []string{"gguf"},
		Outputs: func() (out []string) {
			for _, typ := range refTypes {
				out = append(out, typ.String()+".f32")
			}
			return out
		}(),
		Args: func(dirs []string) []string { return []string{"blocks", dirs[0]} }}
	smolLM2Ref = reftest.Suite{Golden: "testdata/gguf_smollm2.golden", Tool: "gguf_reference.py", Imports: []string{"gguf"},
		Outputs: []string{"ref.json"}}
)

// TestGGUFDequantizeMatchesGGUFPy: random blocks of every supported type,
// and every tensor of the SmolLM2 file when it has been downloaded, equal
// gguf-py's dequantization bit for bit (max abs difference 0), read from
// the golden files gguf_reference.py wrote (internal/reftest).
func TestGGUFDequantizeMatchesGGUFPy(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	inputs := map[Type][]byte{}
	for _, typ := range refTypes {
		ti := types[typ]
		n := 64
		if ti.block == 1 {
			n = 4096
		}
		b := make([]byte, n*ti.bytes)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		// Keep most f16 scales finite and of a sane size, as real files
		// have them (a few stay random: Inf, NaN, subnormal).
		if ti.block > 1 {
			for k := 0; k < n; k++ {
				if k%8 == 7 {
					continue
				}
				blk := b[k*ti.bytes : (k+1)*ti.bytes]
				var at []int
				switch typ {
				case Q4_0, Q8_0:
					at = []int{0}
				case Q4_1, Q4_K:
					at = []int{0, 2}
				case Q6_K:
					at = []int{208}
				}
				for _, o := range at {
					h := uint16(r.UintN(0x3c00)) | uint16(r.UintN(2))<<15 // |x| < 1
					binary.LittleEndian.PutUint16(blk[o:], h)
				}
			}
		}
		inputs[typ] = b
		os.WriteFile(filepath.Join(dir, typ.String()+".bin"), b, 0o644)
	}
	blocksRef.Reference(t, []reftest.Case{{Name: "blocks", Dir: dir}})
	for typ, b := range inputs {
		got, err := Dequantize(typ, b)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, typ.String()+".f32"))
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) != 4*len(got) {
			t.Fatalf("%s: gguf-py gave %d values, anna %d", typ, len(raw)/4, len(got))
		}
		bad := 0
		for i, g := range got {
			w := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			if !sameBits(g, w) {
				if bad < 3 {
					t.Errorf("%s value %d: %v (%08x), gguf-py %v (%08x)", typ, i, g, math.Float32bits(g), w, math.Float32bits(w))
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d values differ", typ, bad, len(got))
		}
	}

	path := gguftest.SmolLM2(t, t.TempDir())
	refDir := t.TempDir()
	gguftest.WriteID(t, refDir)
	suite := smolLM2Ref
	suite.Args = func(dirs []string) []string { return []string{"file", path, filepath.Join(dirs[0], "ref.json")} }
	suite.Reference(t, []reftest.Case{{Name: "smollm2", Dir: refDir}})
	out := filepath.Join(refDir, "ref.json")
	var ref map[string]struct {
		Type   string
		SHA256 string
	}
	b, _ := os.ReadFile(out)
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Tensors) != len(ref) || len(ref) != 272 {
		t.Fatalf("%d tensors, gguf-py %d (want 272)", len(f.Tensors), len(ref))
	}
	count := map[Type]int{}
	for _, tn := range f.Tensors {
		v, err := f.Float32(tn)
		if err != nil {
			t.Fatal(err)
		}
		count[tn.Type]++
		var buf bytes.Buffer
		binary.Write(&buf, binary.LittleEndian, v)
		sum := sha256.Sum256(buf.Bytes())
		if w := ref[tn.Name]; w.SHA256 != hex.EncodeToString(sum[:]) || w.Type != tn.Type.String() {
			t.Errorf("%s (%s): dequantized values differ from gguf-py's (%s)", tn.Name, tn.Type, w.Type)
		}
	}
	t.Logf("SmolLM2: %d tensors equal to gguf-py's, by type %v", len(f.Tensors), count)
	if f.KV["general.architecture"] != "llama" || f.KV["llama.block_count"] != uint64(30) {
		t.Errorf("metadata: architecture %v, blocks %v", f.KV["general.architecture"], f.KV["llama.block_count"])
	}
}

// tiny writes a small GGUF file: a few metadata entries and one tensor.
func tiny(typ Type, dims []uint64, data []byte) []byte {
	var b bytes.Buffer
	w := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	str := func(s string) { w(uint64(len(s))); b.WriteString(s) }
	b.WriteString("GGUF")
	w(uint32(3))
	w(uint64(1))
	w(uint64(2))
	str("general.architecture")
	w(uint32(tString))
	str("llama")
	str("tokenizer.ggml.tokens")
	w(uint32(tArray))
	w(uint32(tString))
	w(uint64(2))
	str("a")
	str("b")
	str("w")
	w(uint32(len(dims)))
	for _, d := range dims {
		w(d)
	}
	w(uint32(typ))
	w(uint64(0))
	for b.Len()%32 != 0 {
		b.WriteByte(0)
	}
	b.Write(data)
	return b.Bytes()
}

// TestOpenRefuses: damaged or unsupported files are errors naming what is
// wrong, never panics.
func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	good := tiny(Q8_0, []uint64{32, 2}, make([]byte, 68))
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o644)
		return p
	}
	f, err := Open(write("good.gguf", good))
	if err != nil {
		t.Fatal(err)
	}
	if f.KV["general.architecture"] != "llama" || len(f.KV["tokenizer.ggml.tokens"].([]any)) != 2 {
		t.Errorf("metadata %v", f.KV)
	}
	v, err := f.Float32(f.Tensors[0])
	if err != nil || len(v) != 64 {
		t.Errorf("Float32: %d values, %v", len(v), err)
	}
	f.Close()
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"magic", append([]byte("GGUX"), good[4:]...), `magic "GGUX"`},
		{"truncated header", good[:40], "truncated"},
		{"truncated data", good[:len(good)-10], `tensor "w" (Q8_0, dims [32 2]) ends at byte`},
		{"bad blocks", tiny(Q8_0, []uint64{30}, make([]byte, 34)), "not whole Q8_0 blocks"},
		{"unknown type", tiny(Type(99), []uint64{4}, make([]byte, 16)), "unknown type 99"},
		{"empty", nil, "truncated"},
	} {
		_, err := Open(write(c.name, c.b))
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want an ErrFormat saying %q", c.name, err, c.want)
		}
	}
	f, err = Open(write("q5k.gguf", tiny(Q5_K, []uint64{256}, make([]byte, 176))))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Float32(f.Tensors[0]); err == nil || !strings.Contains(err.Error(), "quantization Q5_K is not supported") || !strings.Contains(err.Error(), `"w"`) {
		t.Errorf("Q5_K: %v", err)
	}
}

// FuzzOpen: any bytes give a File or an error, never a panic.
func FuzzOpen(f *testing.F) {
	f.Add(tiny(Q4_1, []uint64{32}, make([]byte, 20)))
	f.Add(tiny(F32, []uint64{2, 2}, make([]byte, 16)))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "f.gguf")
		os.WriteFile(p, b, 0o644)
		g, err := Open(p)
		if err != nil {
			return
		}
		for _, tn := range g.Tensors {
			g.Float32(tn)
		}
		g.Close()
	})
}

// TestMatrixReadMatchesFloat32: a Matrix kept in its stored type reads,
// for every supported type and any window of columns (across block
// boundaries, inside one block, a whole row), exactly the values Float32
// dequantizes; PermuteRows reorders rows and nothing else.
func TestMatrixReadMatchesFloat32(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	for _, typ := range []Type{F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K, Q6_K} {
		ti := types[typ]
		rows, cols := 5, 2*max(ti.block, 32)
		data := make([]byte, rows*cols/ti.block*ti.bytes)
		for i := range data {
			data[i] = byte(r.UintN(256))
		}
		path := filepath.Join(dir, typ.String()+".gguf")
		os.WriteFile(path, tiny(typ, []uint64{uint64(cols), uint64(rows)}, data), 0o644)
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := f.Float32(f.Tensors[0])
		if err != nil {
			t.Fatal(err)
		}
		m, err := f.Matrix(f.Tensors[0])
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if m.Rows != rows || m.Cols != cols || m.Bytes() != len(data) {
			t.Fatalf("%s: Matrix %d×%d of %d bytes, want %d×%d of %d", typ, m.Rows, m.Cols, m.Bytes(), rows, cols, len(data))
		}
		perm := []int32{4, 2, 0, 1, 3}
		pm := m.PermuteRows(perm)
		for _, w := range [][2]int{{0, cols}, {0, 1}, {3, 16}, {cols/2 - 5, 10}, {cols - 7, 7}, {16, cols - 16}} {
			got := make([]float32, w[1])
			for i := 0; i < rows; i++ {
				for pass, mm := range []*Matrix{m, pm} {
					src := i
					if pass == 1 {
						src = int(perm[i])
					}
					mm.Read(got, i, w[0])
					for c, g := range got {
						if v := want[src*cols+w[0]+c]; !sameBits(g, v) {
							t.Fatalf("%s permuted=%v row %d columns [%d,%d): column %d is %v, Float32 %v", typ, pass == 1, i, w[0], w[0]+w[1], w[0]+c, g, v)
						}
					}
				}
			}
		}
	}
}
