package safetensors

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	in := map[string]*Tensor{
		"b": {Name: "b", Shape: []int{2, 2}, Data: []float32{1, -2, 3.5, 0}},
		"a": {Name: "a", Shape: []int{3}, Data: []float32{float32(math.Inf(1)), 1e-30, -0}},
	}
	if err := WriteFile(path, in, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	out, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range in {
		got := out[n]
		if got == nil || got.DType != "F32" || len(got.Data) != len(want.Data) {
			t.Fatalf("tensor %s: %+v", n, got)
		}
		for i := range want.Data {
			if math.Float32bits(got.Data[i]) != math.Float32bits(want.Data[i]) {
				t.Errorf("%s[%d] = %v, want %v", n, i, got.Data[i], want.Data[i])
			}
		}
	}
}

// file builds a safetensors stream from a header and raw data.
func file(header string, data []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

func TestDTypes(t *testing.T) {
	var data []byte
	data = binary.LittleEndian.AppendUint16(data, 0x3c00) // F16 1.0
	data = binary.LittleEndian.AppendUint16(data, 0xc000) // F16 -2.0
	data = binary.LittleEndian.AppendUint16(data, 0x3f80) // BF16 1.0
	data = binary.LittleEndian.AppendUint16(data, 0x0001) // F16 smallest subnormal
	data = binary.LittleEndian.AppendUint64(data, 511)    // I64 (BERT's position_ids)
	data = binary.LittleEndian.AppendUint32(data, uint32(0xffffffff))
	hdr := `{"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"bf":{"dtype":"BF16","shape":[1],"data_offsets":[4,6]},` +
		`"sub":{"dtype":"F16","shape":[1],"data_offsets":[6,8]},"pos":{"dtype":"I64","shape":[1,1],"data_offsets":[8,16]},` +
		`"i":{"dtype":"I32","shape":[],"data_offsets":[16,20]},"__metadata__":{"format":"pt"}}`
	b := file(hdr, data)
	ts, err := Read(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if d := ts["h"].Data; d[0] != 1 || d[1] != -2 {
		t.Errorf("F16: %v", d)
	}
	if ts["bf"].Data[0] != 1 || ts["pos"].Data[0] != 511 || ts["i"].Data[0] != -1 {
		t.Errorf("BF16/I64/I32: %v %v %v", ts["bf"].Data, ts["pos"].Data, ts["i"].Data)
	}
	if got, want := ts["sub"].Data[0], float32(math.Ldexp(1, -24)); got != want {
		t.Errorf("F16 subnormal: %g, want %g", got, want)
	}
}

func TestBadFiles(t *testing.T) {
	cases := map[string][]byte{
		"not plausible":       {1, 0, 0, 0, 0, 0, 0, 0xff},
		"parsing header JSON": file(`{"a":`, nil),
		"not supported":       file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{0}),
		"do not fit":          file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)),
		// Found by FuzzRead's seeds: shapes whose element count overflowed
		// int were taken as 0 elements, or made Read panic in makeslice.
		"offsets [0,0) do not fit": file(`{"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}}`, nil),
		"[0,0) do not fit shape":   file(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, nil),
		"negative dimension":       file(`{"a":{"dtype":"F32","shape":[-1,-4],"data_offsets":[0,16]}}`, make([]byte, 16)),
		"null is not an object":    file(`null`, nil),
		`no "shape"`:               file(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, make([]byte, 4)),
		"want two integers":        file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, make([]byte, 4)),
	}
	for want, b := range cases {
		_, err := Read(bytes.NewReader(b), int64(len(b)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want error containing %q, got %v", want, err)
		}
	}
}

// TestReadFileKeeping: the 2-D F16 and BF16 tensors chosen come back kept
// as stored, and their Read gives, for any window of any row, exactly the
// values ReadFile converts; other tensors (unchosen, 1-D, F32) are read as
// ReadFile reads them.
func TestReadFileKeeping(t *testing.T) {
	var data []byte
	hdr := `{`
	add := func(name, dtype string, shape string, n, width int) {
		lo := len(data)
		for i := 0; i < n*width; i++ {
			data = append(data, byte(i*37+len(name)*11+lo)) // varied bits: normals, subnormals, NaNs
		}
		hdr += fmt.Sprintf(`"%s":{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]},`, name, dtype, shape, lo, len(data))
	}
	add("h", "F16", "[3,7]", 21, 2)
	add("bf", "BF16", "[4,5]", 20, 2)
	add("skip", "F16", "[2,2]", 4, 2)
	add("vec", "F16", "[6]", 6, 2)
	add("f", "F32", "[2,3]", 6, 4)
	hdr = strings.TrimSuffix(hdr, ",") + `}`
	path := filepath.Join(t.TempDir(), "k.safetensors")
	if err := os.WriteFile(path, file(hdr, data), 0o644); err != nil {
		t.Fatal(err)
	}
	all, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ts, kept, err := ReadFileKeeping(path, func(n string) bool { return n != "skip" })
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || kept["h"] == nil || kept["bf"] == nil || len(ts) != 3 || ts["skip"] == nil || ts["vec"] == nil || ts["f"] == nil {
		t.Fatalf("kept %v, converted %v", kept, ts)
	}
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
	for name, h := range kept {
		want := all[name].Data
		if r, c := h.Dims(); r*c != len(want) || h.Bytes() != 2*len(want) {
			t.Fatalf("%s: %d×%d in %d bytes for %d values", name, r, c, h.Bytes(), len(want))
		}
		for i := 0; i < h.Rows; i++ {
			for j := 0; j < h.Cols; j++ {
				got := make([]float32, h.Cols-j)
				h.Read(got, i, j)
				for c, g := range got {
					if w := want[i*h.Cols+j+c]; !same(g, w) {
						t.Fatalf("%s row %d from %d: column %d is %v, ReadFile %v", name, i, j, j+c, g, w)
					}
				}
			}
		}
	}
	for name, tt := range ts {
		for i, v := range tt.Data {
			if !same(v, all[name].Data[i]) {
				t.Fatalf("%s[%d] = %v, ReadFile %v", name, i, v, all[name].Data[i])
			}
		}
	}
}
