// Package safetensorstest writes float16 and bfloat16 safetensors files for
// tests (anna's own writer writes float32 only): checkpoints whose weights
// are stored as Hugging Face publishes most of them.
package safetensorstest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"maps"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/anna-search/anna/internal/model/safetensors"
)

// WriteHalf writes tensors to path, each in the dtype dtype names for it:
// "F32", "BF16" (the float32 value truncated to its top 16 bits) or "F16"
// (the value must be a float16 value: the test fails otherwise).
func WriteHalf(tb testing.TB, path string, tensors map[string]*safetensors.Tensor, dtype func(name string) string) {
	tb.Helper()
	header := map[string]any{}
	var data []byte
	for _, name := range slices.Sorted(maps.Keys(tensors)) {
		t, lo := tensors[name], len(data)
		dt := dtype(name)
		for _, v := range t.Data {
			switch dt {
			case "F32":
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
			case "BF16":
				data = binary.LittleEndian.AppendUint16(data, uint16(math.Float32bits(v)>>16))
			case "F16":
				h, ok := toHalf(v)
				if !ok {
					tb.Fatalf("safetensorstest: %s holds %v, not a float16 value", name, v)
				}
				data = binary.LittleEndian.AppendUint16(data, h)
			default:
				tb.Fatalf("safetensorstest: dtype %q for %s (want F32, BF16 or F16)", dt, name)
			}
		}
		header[name] = map[string]any{"dtype": dt, "shape": t.Shape, "data_offsets": []int{lo, len(data)}}
	}
	hj, err := json.Marshal(header)
	if err != nil {
		tb.Fatal(err)
	}
	var f bytes.Buffer
	binary.Write(&f, binary.LittleEndian, uint64(len(hj)))
	f.Write(hj)
	f.Write(data)
	if err := os.WriteFile(path, f.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// toHalf is v's float16 bits when v is a normal or zero float16 value.
func toHalf(v float32) (uint16, bool) {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	if b&0x7fffffff == 0 {
		return sign, true
	}
	exp := int(b>>23&0xff) - 127 + 15
	if exp < 1 || exp > 30 || b&0x1fff != 0 {
		return 0, false
	}
	return sign | uint16(exp)<<10 | uint16(b>>13&0x3ff), true
}
