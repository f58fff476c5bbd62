package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/big"
	"path/filepath"
	"testing"
)

// FuzzRead: Read either fails or returns exactly the header's tensors,
// each with non-negative dimensions whose product is its length, data
// offsets inside the file's data section spanning exactly that many
// elements of its dtype, and values equal to an independent decoding of
// those bytes; written back as F32 and read again, the tensors are the same.
func FuzzRead(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		n := binary.LittleEndian.Uint64(data)
		hdr, body := data[8:8+n], data[8+n:]
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(hdr, &raw); err != nil || raw == nil {
			t.Fatalf("accepted header %q is not a JSON object: %v", hdr, err)
		}
		want := len(raw)
		if _, ok := raw["__metadata__"]; ok {
			want--
		}
		if len(ts) != want {
			t.Fatalf("%d tensors, header names %d", len(ts), want)
		}
		for name, tn := range ts {
			// The format's keys are exact: "shApe" is not "shape", though
			// encoding/json would match a struct field to it.
			var fields map[string]json.RawMessage
			var e struct {
				DType       string
				Shape       []json.Number
				DataOffsets []json.Number
			}
			err := json.Unmarshal(raw[name], &fields)
			for _, f := range []struct {
				key string
				v   any
			}{{"dtype", &e.DType}, {"shape", &e.Shape}, {"data_offsets", &e.DataOffsets}} {
				if err == nil {
					err = json.Unmarshal(fields[f.key], f.v)
				}
			}
			if err != nil {
				t.Fatalf("%q: accepted entry %s: %v", name, raw[name], err)
			}
			if tn.Name != name || tn.DType != e.DType || len(e.DataOffsets) != 2 || len(tn.Shape) != len(e.Shape) {
				t.Fatalf("%q: tensor %s %v from entry %s", name, tn.DType, tn.Shape, raw[name])
			}
			prod := big.NewInt(1)
			for i, d := range e.Shape {
				v, err := d.Int64()
				if err != nil || v < 0 || int64(tn.Shape[i]) != v {
					t.Fatalf("%q: shape %v accepted as %v", name, e.Shape, tn.Shape)
				}
				prod.Mul(prod, big.NewInt(v))
			}
			if !prod.IsInt64() || prod.Int64() != int64(len(tn.Data)) || int64(tn.Len()) != int64(len(tn.Data)) {
				t.Fatalf("%q: %d values, Len %d, shape %v holds %s", name, len(tn.Data), tn.Len(), tn.Shape, prod)
			}
			elems := prod.Int64()
			lo, err1 := e.DataOffsets[0].Int64()
			hi, err2 := e.DataOffsets[1].Int64()
			width := map[string]int64{"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4}[tn.DType]
			if err1 != nil || err2 != nil || width == 0 || lo < 0 || hi < lo || hi > int64(len(body)) || hi-lo != elems*width {
				t.Fatalf("%q: offsets %v of %s %v accepted in %d bytes", name, e.DataOffsets, tn.DType, tn.Shape, len(body))
			}
			for i := range tn.Data {
				if got, want := tn.Data[i], decodeRef(tn.DType, body[lo+int64(i)*width:]); math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("%q[%d] = %v (%08x), bytes decode to %v (%08x)", name, i, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			}
		}
		path := filepath.Join(t.TempDir(), "m.safetensors")
		if err := WriteFile(path, ts, nil); err != nil {
			t.Fatalf("writing back: %v", err)
		}
		again, err := ReadFile(path)
		if err != nil || len(again) != len(ts) {
			t.Fatalf("reading back: %d tensors, %v", len(again), err)
		}
		for name, tn := range ts {
			a := again[name]
			if a == nil || len(a.Data) != len(tn.Data) || len(a.Shape) != len(tn.Shape) {
				t.Fatalf("%q read back as %+v", name, a)
			}
			for i := range tn.Shape {
				if a.Shape[i] != tn.Shape[i] {
					t.Fatalf("%q: shape %v read back as %v", name, tn.Shape, a.Shape)
				}
			}
			for i := range tn.Data {
				if math.Float32bits(a.Data[i]) != math.Float32bits(tn.Data[i]) {
					t.Fatalf("%q[%d]: %v read back as %v", name, i, tn.Data[i], a.Data[i])
				}
			}
		}
	})
}

// decodeRef converts one element to float32 without the package's code:
// binary16 by its definition, bfloat16 as the top half of a float32.
func decodeRef(dtype string, b []byte) float32 {
	switch dtype {
	case "F32":
		return math.Float32frombits(binary.LittleEndian.Uint32(b))
	case "BF16":
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16)
	case "I64":
		return float32(int64(binary.LittleEndian.Uint64(b)))
	case "I32":
		return float32(int32(binary.LittleEndian.Uint32(b)))
	}
	h := binary.LittleEndian.Uint16(b)
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, mant := int(h>>10&0x1f), float64(h&0x3ff)
	switch {
	case exp == 0:
		return float32(sign * math.Ldexp(mant, -24))
	case exp == 0x1f && mant == 0:
		return float32(math.Inf(int(sign)))
	case exp == 0x1f: // NaN: the payload moves to float32's top mantissa bits
		bits := uint32(h&0x8000)<<16 | 0x7f800000 | uint32(h&0x3ff)<<13
		return math.Float32frombits(bits)
	}
	return float32(sign * math.Ldexp(1+mant/1024, exp-15))
}
