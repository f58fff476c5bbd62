// Package safetensors reads and writes the Hugging Face safetensors format:
// an 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and byte range, then the raw little-endian data.
//
// Reading converts F16, BF16 and F32 tensors to float32, because every
// consumer in anna (ONNX export, the trainer) computes in fp32; the trainer
// may keep a frozen F16/BF16 weight as stored instead (ReadFileKeeping,
// Half), widening it where it is used. Integer
// tensors (I64, I32: e.g. BERT's embeddings.position_ids buffer, stored by
// older PyTorch exports) are converted too, exactly for |v| ≤ 2^24; nothing
// in anna reads their values.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"

	"github.com/anna-search/anna/internal/atomicfile"
)

// Tensor is one named tensor converted to float32, row-major.
type Tensor struct {
	Name  string
	DType string // dtype as stored in the file (F16, BF16, F32)
	Shape []int
	Data  []float32
}

// Len is the number of elements implied by Shape.
func (t *Tensor) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

type headerEntry struct {
	DType       string   `json:"dtype"`
	Shape       []int    `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// maxHeader bounds the JSON header so a corrupt length cannot make us
// allocate gigabytes.
const maxHeader = 100 << 20

// ReadFile reads every tensor in path.
func ReadFile(path string) (map[string]*Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: open: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: stat %s: %w", path, err)
	}
	ts, err := Read(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	return ts, nil
}

// Half is a 2-D F16 or BF16 tensor kept as stored (ReadFileKeeping): Read
// widens the elements asked for, exactly as ReadFile converts them, so a
// frozen weight takes half the memory of its float32 form. It satisfies
// the trainer's tensor.Rows.
type Half struct {
	Name       string
	DType      string // F16 or BF16
	Rows, Cols int
	data       []byte // little-endian, row-major
}

// Read writes elements [j, j+len(dst)) of row i into dst as float32.
func (h *Half) Read(dst []float32, i, j int) {
	widen(dst, h.data[2*(i*h.Cols+j):2*(i*h.Cols+j+len(dst))], h.DType)
}

// widen converts little-endian F16 or BF16 values b into dst.
func widen(dst []float32, b []byte, dtype string) {
	if dtype == "BF16" {
		for c := range dst {
			dst[c] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*c:])) << 16)
		}
		return
	}
	for c := range dst {
		dst[c] = HalfToFloat(binary.LittleEndian.Uint16(b[2*c:]))
	}
}

// Dims is the shape, rows × columns.
func (h *Half) Dims() (rows, cols int) { return h.Rows, h.Cols }

// Bytes is the size of the kept data.
func (h *Half) Bytes() int { return len(h.data) }

// ReadFileKeeping is ReadFile, except that the 2-D F16 and BF16 tensors
// keep says yes to (by name) come back in kept, as stored, and are not in
// tensors.
func ReadFileKeeping(path string, keep func(name string) bool) (tensors map[string]*Tensor, kept map[string]*Half, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: open: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: stat %s: %w", path, err)
	}
	if tensors, kept, err = read(f, st.Size(), keep); err != nil {
		return nil, nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	return tensors, kept, nil
}

// Read parses a safetensors stream of the given total size.
func Read(r io.Reader, size int64) (map[string]*Tensor, error) {
	ts, _, err := read(r, size, nil)
	return ts, err
}

func read(r io.Reader, size int64, keep func(string) bool) (map[string]*Tensor, map[string]*Half, error) {
	var hl [8]byte
	if _, err := io.ReadFull(r, hl[:]); err != nil {
		return nil, nil, fmt.Errorf("reading header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(hl[:])
	if n == 0 || n > maxHeader || int64(n)+8 > size {
		return nil, nil, fmt.Errorf("header length %d is not plausible for a file of %d bytes", n, size)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, nil, fmt.Errorf("reading header: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, nil, fmt.Errorf("parsing header JSON: %w", err)
	}
	if raw == nil {
		return nil, nil, fmt.Errorf("parsing header JSON: %s is not an object", hdr)
	}
	body := make([]byte, size-8-int64(n))
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, nil, fmt.Errorf("reading tensor data: %w", err)
	}
	out, kept := make(map[string]*Tensor, len(raw)), map[string]*Half{}
	for name, msg := range raw {
		if name == "__metadata__" {
			continue
		}
		e, err := parseEntry(msg)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: bad header entry: %w", name, err)
		}
		if keep != nil && (e.DType == "F16" || e.DType == "BF16") && len(e.Shape) == 2 && keep(name) {
			b, err := span(name, e, body, 2)
			if err != nil {
				return nil, nil, err
			}
			// A copy: the file's other tensors are not kept alive by it.
			kept[name] = &Half{Name: name, DType: e.DType, Rows: e.Shape[0], Cols: e.Shape[1], data: append([]byte(nil), b...)}
			continue
		}
		t, err := decode(name, e, body)
		if err != nil {
			return nil, nil, err
		}
		out[name] = t
	}
	return out, kept, nil
}

// parseEntry reads one tensor's header entry: "dtype", "shape" and
// "data_offsets" are all required (keys match exactly, as in the Rust
// reference), dimensions are non-negative and offsets are two.
func parseEntry(msg json.RawMessage) (headerEntry, error) {
	var e headerEntry
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(msg, &fields); err != nil || fields == nil {
		return e, fmt.Errorf("%s is not an object", msg)
	}
	for _, key := range []string{"dtype", "shape", "data_offsets"} {
		if v, ok := fields[key]; !ok || string(v) == "null" {
			return e, fmt.Errorf("no %q", key)
		}
	}
	var offsets []int64
	if err := json.Unmarshal(fields["dtype"], &e.DType); err != nil {
		return e, fmt.Errorf("dtype: %w", err)
	}
	if err := json.Unmarshal(fields["shape"], &e.Shape); err != nil {
		return e, fmt.Errorf("shape: %w", err)
	}
	if err := json.Unmarshal(fields["data_offsets"], &offsets); err != nil || len(offsets) != 2 {
		return e, fmt.Errorf("data_offsets %s: want two integers", fields["data_offsets"])
	}
	copy(e.DataOffsets[:], offsets)
	for _, d := range e.Shape {
		if d < 0 {
			return e, fmt.Errorf("shape %v has a negative dimension", e.Shape)
		}
	}
	return e, nil
}

// elements is the product of shape's (non-negative) dimensions, or -1 when
// it exceeds limit.
func elements(shape []int, limit int) int {
	for _, d := range shape {
		if d == 0 {
			return 0
		}
	}
	n := 1
	for _, d := range shape {
		if n > limit/d {
			return -1
		}
		n *= d
	}
	return n
}

func decode(name string, e headerEntry, body []byte) (*Tensor, error) {
	t := &Tensor{Name: name, DType: e.DType, Shape: e.Shape}
	var width int
	switch e.DType {
	case "F32":
		width = 4
	case "F16", "BF16":
		width = 2
	case "I64":
		width = 8
	case "I32":
		width = 4
	default:
		return nil, fmt.Errorf("tensor %q: dtype %s not supported (want F32, F16, BF16, I64 or I32)", name, e.DType)
	}
	b, err := span(name, e, body, width)
	if err != nil {
		return nil, err
	}
	t.Data = make([]float32, len(b)/width)
	if width == 2 {
		widen(t.Data, b, e.DType)
		return t, nil
	}
	for i := range t.Data {
		switch e.DType {
		case "F32":
			t.Data[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		case "I64":
			t.Data[i] = float32(int64(binary.LittleEndian.Uint64(b[8*i:])))
		case "I32":
			t.Data[i] = float32(int32(binary.LittleEndian.Uint32(b[4*i:])))
		}
	}
	return t, nil
}

// span is e's bytes in body, checked against its shape and width.
func span(name string, e headerEntry, body []byte, width int) ([]byte, error) {
	// No tensor holds more elements than the data section has room for;
	// bounding the product by that also rules out overflow.
	n := elements(e.Shape, len(body)/width)
	lo, hi := e.DataOffsets[0], e.DataOffsets[1]
	if n < 0 || lo < 0 || hi < lo || hi > int64(len(body)) || hi-lo != int64(n*width) {
		return nil, fmt.Errorf("tensor %q: data offsets [%d,%d) do not fit shape %v of %s in %d bytes", name, lo, hi, e.Shape, e.DType, len(body))
	}
	return body[lo:hi], nil
}

// HalfToFloat converts an IEEE 754 binary16 value to float32 exactly.
func HalfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	default:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	}
}

// WriteFile writes tensors as F32 safetensors, names sorted so the file is
// deterministic. Shapes must match data lengths.
func WriteFile(path string, tensors map[string]*Tensor, metadata map[string]string) error {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	hdr := map[string]any{}
	if len(metadata) > 0 {
		hdr["__metadata__"] = metadata
	}
	var off int64
	for _, n := range names {
		t := tensors[n]
		if t.Len() != len(t.Data) {
			return fmt.Errorf("safetensors: tensor %q: shape %v holds %d values, data has %d", n, t.Shape, t.Len(), len(t.Data))
		}
		size := int64(4 * len(t.Data))
		hdr[n] = headerEntry{DType: "F32", Shape: t.Shape, DataOffsets: [2]int64{off, off + size}}
		off += size
	}
	hj, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("safetensors: encoding header: %w", err)
	}
	// Pad the header with spaces to 8 bytes so the data is aligned.
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	err = atomicfile.Write(path, func(w io.Writer) error {
		var hl [8]byte
		binary.LittleEndian.PutUint64(hl[:], uint64(len(hj)))
		if _, err := w.Write(hl[:]); err != nil {
			return err
		}
		if _, err := w.Write(hj); err != nil {
			return err
		}
		buf := make([]byte, 0, 1<<16)
		for _, n := range names {
			for _, v := range tensors[n].Data {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
				if len(buf) == cap(buf) {
					if _, err := w.Write(buf); err != nil {
						return err
					}
					buf = buf[:0]
				}
			}
		}
		_, err := w.Write(buf)
		return err
	})
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}
