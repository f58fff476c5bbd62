// Package gguf reads GGUF files (llama.cpp's model format, versions 2 and
// 3): the key-value metadata, the tensor table, and each tensor's data
// dequantized to float32 bit-exactly as gguf-py (the gguf package that
// llama.cpp publishes on PyPI) dequantizes it — F32, F16, BF16, Q4_0, Q4_1,
// Q8_0, Q4_K and Q6_K — whole, or kept in its stored type as a Matrix whose
// rows are dequantized on demand, bit for bit the same values (the
// trainer's frozen LoRA base). Any other type is refused, naming the
// tensor.
//
// Invariants: Open reads only the header and the tensor table, checking
// every length against the file's size before it allocates, so a truncated
// or damaged file is an error naming the field (never a panic or a huge
// allocation); every tensor's data lies inside the file, at an offset
// aligned as general.alignment says. Nothing is written.
package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/anna-search/anna/internal/model/safetensors"
)

// Type is a tensor's element type (ggml_type).
type Type uint32

// The types whose sizes are known (ggml.h); Dequantize supports those
// marked in types.
const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q4_1 Type = 3
	Q5_0 Type = 6
	Q5_1 Type = 7
	Q8_0 Type = 8
	Q8_1 Type = 9
	Q2_K Type = 10
	Q3_K Type = 11
	Q4_K Type = 12
	Q5_K Type = 13
	Q6_K Type = 14
	Q8_K Type = 15
	I8   Type = 24
	I16  Type = 25
	I32  Type = 26
	I64  Type = 27
	F64  Type = 28
	BF16 Type = 30
)

type typeInfo struct {
	name         string
	block, bytes int  // elements per block, bytes per block
	dequantizes  bool // deq has a case for it
}

var types = map[Type]typeInfo{
	F32:  {"F32", 1, 4, true},
	F16:  {"F16", 1, 2, true},
	BF16: {"BF16", 1, 2, true},
	Q4_0: {"Q4_0", 32, 18, true},
	Q4_1: {"Q4_1", 32, 20, true},
	Q8_0: {"Q8_0", 32, 34, true},
	Q4_K: {"Q4_K", 256, 144, true},
	Q6_K: {"Q6_K", 256, 210, true},
	// Known sizes, no dequantizer (refused by name).
	Q5_0: {"Q5_0", 32, 22, false},
	Q5_1: {"Q5_1", 32, 24, false},
	Q8_1: {"Q8_1", 32, 36, false},
	Q2_K: {"Q2_K", 256, 84, false},
	Q3_K: {"Q3_K", 256, 110, false},
	Q5_K: {"Q5_K", 256, 176, false},
	Q8_K: {"Q8_K", 256, 292, false},
	I8:   {"I8", 1, 1, false},
	I16:  {"I16", 1, 2, false},
	I32:  {"I32", 1, 4, false},
	I64:  {"I64", 1, 8, false},
	F64:  {"F64", 1, 8, false},
}

func (t Type) String() string {
	if ti, ok := types[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("type %d", uint32(t))
}

// Tensor is one entry of the tensor table. Dims are in GGUF order
// (ggml's ne: the fastest-varying first), so a [rows, cols] matrix of
// PyTorch is Dims {cols, rows}.
type Tensor struct {
	Name   string
	Dims   []uint64
	Type   Type
	Offset uint64 // from the start of the data section
}

// Elements is the product of the dims.
func (t Tensor) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is an open GGUF file.
type File struct {
	Version uint32
	// KV holds the metadata: uint64, int64, float64, bool, string, or
	// []any of those for arrays.
	KV      map[string]any
	Tensors []Tensor
	path    string
	f       *os.File
	data    int64 // where the data section starts
	size    int64
}

// ErrFormat is wrapped by every error about the file's contents.
var ErrFormat = errors.New("gguf: bad file")

// Open reads path's header and tensor table.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gguf: %w", err)
	}
	g := &File{path: path, f: f, size: fi.Size(), KV: map[string]any{}}
	if err := g.readHeader(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// Close closes the file.
func (g *File) Close() error { return g.f.Close() }

type reader struct {
	r    *bufio.Reader
	pos  int64
	size int64
	err  error
}

func (r *reader) fail(field string, err error) {
	if r.err == nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("the file ends inside %s (at byte %d of %d): truncated", field, r.pos, r.size)
		} else {
			err = fmt.Errorf("%s at byte %d: %w", field, r.pos, err)
		}
		r.err = fmt.Errorf("%w: %w", ErrFormat, err)
	}
}

func (r *reader) bytes(field string, n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(r.size-r.pos) {
		r.fail(field, fmt.Errorf("%d bytes run past the end of the file (%d bytes left): truncated or damaged", n, r.size-r.pos))
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		r.fail(field, err)
		return nil
	}
	r.pos += int64(n)
	return b
}

func (r *reader) u32(field string) uint32 {
	b := r.bytes(field, 4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (r *reader) u64(field string) uint64 {
	b := r.bytes(field, 8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

func (r *reader) str(field string) string {
	n := r.u64(field + " length")
	return string(r.bytes(field, n))
}

// Value types of the metadata.
const (
	tU8 = iota
	tI8
	tU16
	tI16
	tU32
	tI32
	tF32
	tBool
	tString
	tArray
	tU64
	tI64
	tF64
)

func (r *reader) value(field string, typ uint32, depth int) any {
	switch typ {
	case tU8:
		if b := r.bytes(field, 1); b != nil {
			return uint64(b[0])
		}
	case tI8:
		if b := r.bytes(field, 1); b != nil {
			return int64(int8(b[0]))
		}
	case tU16:
		if b := r.bytes(field, 2); b != nil {
			return uint64(binary.LittleEndian.Uint16(b))
		}
	case tI16:
		if b := r.bytes(field, 2); b != nil {
			return int64(int16(binary.LittleEndian.Uint16(b)))
		}
	case tU32:
		return uint64(r.u32(field))
	case tI32:
		return int64(int32(r.u32(field)))
	case tF32:
		return float64(math.Float32frombits(r.u32(field)))
	case tBool:
		if b := r.bytes(field, 1); b != nil {
			return b[0] != 0
		}
	case tString:
		return r.str(field)
	case tU64:
		return r.u64(field)
	case tI64:
		return int64(r.u64(field))
	case tF64:
		return math.Float64frombits(r.u64(field))
	case tArray:
		if depth > 0 {
			r.fail(field, errors.New("an array of arrays"))
			return nil
		}
		et := r.u32(field + " element type")
		n := r.u64(field + " count")
		// Every element takes at least one byte.
		if r.err == nil && n > uint64(r.size-r.pos) {
			r.fail(field, fmt.Errorf("%d elements cannot fit in the %d bytes left", n, r.size-r.pos))
		}
		if r.err != nil {
			return nil
		}
		out := make([]any, 0, n)
		for i := uint64(0); i < n && r.err == nil; i++ {
			out = append(out, r.value(field, et, depth+1))
		}
		return out
	default:
		r.fail(field, fmt.Errorf("unknown value type %d", typ))
	}
	return nil
}

func (g *File) readHeader() error {
	r := &reader{r: bufio.NewReaderSize(g.f, 1<<20), size: g.size}
	magic := r.bytes("magic", 4)
	if r.err == nil && string(magic) != "GGUF" {
		return fmt.Errorf("%w: magic %q, want \"GGUF\" (not a GGUF file)", ErrFormat, magic)
	}
	g.Version = r.u32("version")
	if r.err == nil && g.Version != 2 && g.Version != 3 {
		return fmt.Errorf("%w: version %d not supported (want 2 or 3)", ErrFormat, g.Version)
	}
	nt := r.u64("tensor count")
	nkv := r.u64("metadata count")
	if r.err == nil && (nt > uint64(g.size)/8 || nkv > uint64(g.size)/8) {
		return fmt.Errorf("%w: %d tensors and %d metadata entries cannot fit in %d bytes", ErrFormat, nt, nkv, g.size)
	}
	for i := uint64(0); i < nkv && r.err == nil; i++ {
		key := r.str(fmt.Sprintf("metadata key %d", i))
		typ := r.u32(fmt.Sprintf("type of metadata %q", key))
		v := r.value(fmt.Sprintf("metadata %q", key), typ, 0)
		if r.err == nil {
			g.KV[key] = v
		}
	}
	for i := uint64(0); i < nt && r.err == nil; i++ {
		var t Tensor
		t.Name = r.str(fmt.Sprintf("name of tensor %d", i))
		nd := r.u32(fmt.Sprintf("dimensions of tensor %q", t.Name))
		if r.err == nil && nd > 8 {
			r.fail(fmt.Sprintf("tensor %q", t.Name), fmt.Errorf("%d dimensions (at most 8)", nd))
		}
		for j := uint32(0); j < nd && r.err == nil; j++ {
			t.Dims = append(t.Dims, r.u64(fmt.Sprintf("dimension %d of tensor %q", j, t.Name)))
		}
		t.Type = Type(r.u32(fmt.Sprintf("type of tensor %q", t.Name)))
		t.Offset = r.u64(fmt.Sprintf("offset of tensor %q", t.Name))
		g.Tensors = append(g.Tensors, t)
	}
	if r.err != nil {
		return r.err
	}
	align := uint64(32)
	if a, ok := g.KV["general.alignment"].(uint64); ok {
		if a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("%w: general.alignment %d is not a power of two", ErrFormat, a)
		}
		align = a
	}
	g.data = int64((uint64(r.pos) + align - 1) / align * align)
	for _, t := range g.Tensors {
		ti, ok := types[t.Type]
		if !ok {
			return fmt.Errorf("%w: tensor %q has unknown type %d", ErrFormat, t.Name, uint32(t.Type))
		}
		n := t.Elements()
		if n%uint64(ti.block) != 0 {
			return fmt.Errorf("%w: tensor %q: %d elements are not whole %s blocks of %d", ErrFormat, t.Name, n, ti.name, ti.block)
		}
		if t.Offset%align != 0 {
			return fmt.Errorf("%w: tensor %q: offset %d is not aligned to %d", ErrFormat, t.Name, t.Offset, align)
		}
		end := uint64(g.data) + t.Offset + n/uint64(ti.block)*uint64(ti.bytes)
		if end > uint64(g.size) || end < t.Offset {
			return fmt.Errorf("%w: tensor %q (%s, dims %v) ends at byte %d, past the end of the file (%d bytes): truncated", ErrFormat, t.Name, ti.name, t.Dims, end, g.size)
		}
	}
	return nil
}

// Int is the integer metadata value key; an error names a key that is
// missing or not an integer.
func (g *File) Int(key string) (int, error) {
	v, ok := g.KV[key]
	if !ok {
		return 0, fmt.Errorf("metadata %s is missing", key)
	}
	n, ok := asInt(v)
	if !ok {
		return 0, fmt.Errorf("metadata %s is %v (%T), want a non-negative integer", key, v, v)
	}
	return n, nil
}

// Raw returns t's bytes as stored.
func (g *File) Raw(t Tensor) ([]byte, error) {
	ti, ok := types[t.Type]
	if !ok {
		return nil, fmt.Errorf("gguf: %s: tensor %q has unknown type %d", g.path, t.Name, uint32(t.Type))
	}
	n := t.Elements() / uint64(ti.block) * uint64(ti.bytes)
	b := make([]byte, n)
	if _, err := g.f.ReadAt(b, g.data+int64(t.Offset)); err != nil {
		return nil, fmt.Errorf("gguf: %s: reading tensor %q: %w", g.path, t.Name, err)
	}
	return b, nil
}

// Float32 returns t's values dequantized (see Dequantize).
func (g *File) Float32(t Tensor) ([]float32, error) {
	b, err := g.Raw(t)
	if err != nil {
		return nil, err
	}
	v, err := Dequantize(t.Type, b)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: tensor %q: %w", g.path, t.Name, err)
	}
	return v, nil
}

// Dequantize turns data of type t (whole blocks) into float32 values, as
// gguf-py's quants.dequantize does, bit for bit.
func Dequantize(t Type, data []byte) ([]float32, error) {
	ti, ok := types[t]
	if !ok || !ti.dequantizes {
		var have []string
		for _, x := range []Type{F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K, Q6_K} {
			have = append(have, x.String())
		}
		return nil, fmt.Errorf("quantization %s is not supported (anna reads %s)", t, strings.Join(have, ", "))
	}
	if len(data)%ti.bytes != 0 {
		return nil, fmt.Errorf("%d bytes are not whole %s blocks of %d bytes", len(data), ti.name, ti.bytes)
	}
	nb := len(data) / ti.bytes
	out := make([]float32, nb*ti.block)
	for i := 0; i < nb; i++ {
		deq(t, out[i*ti.block:(i+1)*ti.block], data[i*ti.bytes:(i+1)*ti.bytes])
	}
	return out, nil
}

// f16 reads an IEEE binary16 value, exactly as numpy's astype(float32).
func f16(b []byte) float32 { return safetensors.HalfToFloat(binary.LittleEndian.Uint16(b)) }

// The products and sums below are written with explicit float32
// conversions: Go may otherwise fuse a*b+c into one rounding (FMA), and
// numpy rounds each operation.

func deqF32(dst []float32, b []byte) { dst[0] = math.Float32frombits(binary.LittleEndian.Uint32(b)) }

func deqF16(dst []float32, b []byte) { dst[0] = f16(b) }

func deqBF16(dst []float32, b []byte) {
	dst[0] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16)
}

// Q4_0: d (f16), 16 bytes of nibbles: low nibbles are values 0..15, high
// 16..31; value = d * (q - 8).
func deqQ4_0(dst []float32, b []byte) {
	d := f16(b)
	for j := 0; j < 16; j++ {
		q := b[2+j]
		dst[j] = d * float32(int(q&15)-8)
		dst[j+16] = d * float32(int(q>>4)-8)
	}
}

// Q4_1: d, m (f16), 16 bytes of nibbles; value = d*q + m.
func deqQ4_1(dst []float32, b []byte) {
	d, m := f16(b), f16(b[2:])
	for j := 0; j < 16; j++ {
		q := b[4+j]
		dst[j] = float32(d*float32(q&15)) + m
		dst[j+16] = float32(d*float32(q>>4)) + m
	}
}

// Q8_0: d (f16), 32 int8; value = q * d.
func deqQ8_0(dst []float32, b []byte) {
	d := f16(b)
	for j := 0; j < 32; j++ {
		dst[j] = float32(int8(b[2+j])) * d
	}
}

// Q4_K: d, dmin (f16), 12 bytes of 6-bit scales and mins for 8 groups of
// 32, 128 bytes of nibbles (each 32 bytes: low nibbles one group, high the
// next); value = (d*sc)*q - (dmin*m).
func deqQ4K(dst []float32, b []byte) {
	d, dmin := f16(b), f16(b[2:])
	s := b[4:16]
	qs := b[16:]
	var sc, mn [8]uint8
	for j := 0; j < 4; j++ {
		sc[j] = s[j] & 0x3f
		mn[j] = s[4+j] & 0x3f
		sc[4+j] = s[8+j]&0x0f | (s[j]>>2)&0x30
		mn[4+j] = s[8+j]>>4 | (s[4+j]>>2)&0x30
	}
	for g := 0; g < 8; g++ {
		dg := d * float32(sc[g])
		mg := dmin * float32(mn[g])
		chunk := qs[(g/2)*32 : (g/2)*32+32]
		shift := uint(4 * (g % 2))
		for k := 0; k < 32; k++ {
			q := float32((chunk[k] >> shift) & 15)
			dst[g*32+k] = float32(dg*q) - mg
		}
	}
}

// Q6_K: 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16 int8
// scales, d (f16); value = (d*scale[p/16]) * (q - 32).
func deqQ6K(dst []float32, b []byte) {
	ql, qh, sc := b[:128], b[128:192], b[192:208]
	d := f16(b[208:])
	for p := 0; p < 256; p++ {
		h := p / 128
		lo := (ql[h*64+p%64] >> (4 * uint((p%128)/64))) & 15
		hi := (qh[h*32+p%32] >> (2 * uint((p%128)/32))) & 3
		q := int8(lo|hi<<4) - 32
		ds := d * float32(int8(sc[p/16]))
		dst[p] = ds * float32(q)
	}
}

// Matrix is a 2-D tensor left in its stored type (a block quantization,
// float16, bfloat16): Read dequantizes the elements it is asked for, bit
// for bit as Float32 does, so a frozen weight can stay at its stored size
// (4.5–5 bits per weight for the 4-bit types) and be widened where it is
// used. It satisfies the trainer's tensor.Rows.
type Matrix struct {
	Type       Type
	Rows, Cols int // PyTorch's shape: Dims {Cols, Rows}
	data       []byte
	rowBytes   int
	block      typeInfo
	perm       []int32 // row i is stored row perm[i]; nil: the identity
}

// Matrix reads t, a 2-D tensor of a type Dequantize supports, keeping its
// stored bytes.
func (g *File) Matrix(t Tensor) (*Matrix, error) {
	ti, ok := types[t.Type]
	if !ok || !ti.dequantizes {
		_, err := Dequantize(t.Type, nil)
		return nil, fmt.Errorf("gguf: %s: tensor %q: %w", g.path, t.Name, err)
	}
	if len(t.Dims) != 2 || t.Dims[0]%uint64(ti.block) != 0 {
		return nil, fmt.Errorf("gguf: %s: tensor %q: dims %v are not a matrix of whole %s blocks", g.path, t.Name, t.Dims, ti.name)
	}
	b, err := g.Raw(t)
	if err != nil {
		return nil, err
	}
	cols := int(t.Dims[0])
	return &Matrix{Type: t.Type, Rows: int(t.Dims[1]), Cols: cols, data: b, rowBytes: cols / ti.block * ti.bytes, block: ti}, nil
}

// Bytes is the size of the stored data.
func (m *Matrix) Bytes() int { return len(m.data) }

// Dims is the shape, rows × columns.
func (m *Matrix) Dims() (rows, cols int) { return m.Rows, m.Cols }

// PermuteRows returns m with its rows reordered: row i of the result is
// row perm[i] of m. The data is shared.
func (m *Matrix) PermuteRows(perm []int32) *Matrix {
	if len(perm) != m.Rows {
		panic(fmt.Sprintf("gguf: PermuteRows: %d indices for %d rows", len(perm), m.Rows))
	}
	p := *m
	p.perm = make([]int32, len(perm))
	for i, r := range perm {
		p.perm[i] = m.row(int(r))
	}
	return &p
}

func (m *Matrix) row(i int) int32 {
	if m.perm != nil {
		return m.perm[i]
	}
	return int32(i)
}

// Read writes elements [j, j+len(dst)) of row i into dst, dequantized.
func (m *Matrix) Read(dst []float32, i, j int) {
	if j < 0 || j+len(dst) > m.Cols {
		panic(fmt.Sprintf("gguf: Matrix.Read: columns [%d,%d) of %d", j, j+len(dst), m.Cols))
	}
	row := m.data[int(m.row(i))*m.rowBytes:][:m.rowBytes]
	bs, bb := m.block.block, m.block.bytes
	var buf [256]float32 // a partial block (256: the K types'); kept on the stack by deq's direct calls
	for c := 0; c < len(dst); {
		blk, off := (j+c)/bs, (j+c)%bs
		if off == 0 && len(dst)-c >= bs { // a whole block: straight into dst
			deq(m.Type, dst[c:c+bs], row[blk*bb:(blk+1)*bb])
			c += bs
			continue
		}
		deq(m.Type, buf[:bs], row[blk*bb:(blk+1)*bb])
		c += copy(dst[c:], buf[off:bs])
	}
}

// deq dequantizes one block of type t. It calls each type's function
// directly (not through types' function values), so that a caller's
// stack buffer does not escape to the heap: Matrix.Read runs for every
// row a product packs.
func deq(t Type, dst []float32, b []byte) {
	switch t {
	case F32:
		deqF32(dst, b)
	case F16:
		deqF16(dst, b)
	case BF16:
		deqBF16(dst, b)
	case Q4_0:
		deqQ4_0(dst, b)
	case Q4_1:
		deqQ4_1(dst, b)
	case Q8_0:
		deqQ8_0(dst, b)
	case Q4_K:
		deqQ4K(dst, b)
	case Q6_K:
		deqQ6K(dst, b)
	default:
		panic(fmt.Sprintf("gguf: no dequantizer for %s", t)) // Matrix refuses such tensors
	}
}
