package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/anna-search/anna/model/onnxfile"
)

func main() {
	m, _ := onnxfile.ReadFile(os.Args[1])
	for k, t := range m.Initializers {
		if !strings.HasSuffix(k, "_quantized") || !strings.HasPrefix(k, "onnx::") {
			continue
		}
		base := strings.TrimSuffix(k, "_quantized")
		zp := m.Initializers[base+"_zero_point"]
		cols := t.Shape[1]
		lo, hi := 1000, -1000
		qlo, qhi := 1000, -1000
		nz := 0
		for i, v := range t.Int64 {
			d := int(v - zp.Int64[i%cols])
			lo, hi = min(lo, d), max(hi, d)
			qlo, qhi = min(qlo, int(v)), max(qhi, int(v))
		}
		for _, z := range zp.Int64 {
			if z != 0 {
				nz++
			}
		}
		fmt.Println(k, t.Shape, "q-zp in", lo, hi, "q in", qlo, qhi, "nonzero zps", nz)
		break
	}
}
