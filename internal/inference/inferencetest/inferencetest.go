// Package inferencetest holds test helpers shared by the packages built on
// internal/inference (encoder, rerank): golden files of model outputs, and
// calls released at once from several goroutines.
//
// A golden file is JSON, a list of cases, each a name, a key (what else
// identifies the output, such as a fingerprint) and rows of float32s
// stored as base64 of their little-endian bits, so a comparison can be
// bit-exact. ONNX Runtime's kernels differ between CPUs, so on another
// machine than the one that recorded a file the outputs may differ in the
// last bits: Golden then accepts a tolerance and logs how many values were
// not bit-identical, unless the test runs with -golden.exact.
package inferencetest

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var (
	update = flag.Bool("golden.update", false, "rewrite the golden files from the current code")
	exact  = flag.Bool("golden.exact", false, "require outputs bit-identical to the golden files")
)

// Case is one named set of outputs.
type Case struct {
	Name string
	Key  string
	Rows [][]float32
}

type fileCase struct {
	Name string   `json:"name"`
	Key  string   `json:"key,omitempty"`
	Rows []string `json:"rows"`
}

func encodeRow(v []float32) string {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func decodeRow(t testing.TB, s string) []float32 {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		t.Fatalf("golden row %.20q: not base64 of float32s (%v)", s, err)
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// Golden compares got with the golden file at path, value by value: equal
// bits pass; otherwise a difference above tolerance, or any with
// -golden.exact, fails. With -golden.update it writes got to path instead.
func Golden(t testing.TB, path string, got []Case, tolerance float64) {
	t.Helper()
	if *update {
		fc := make([]fileCase, len(got))
		for i, c := range got {
			fc[i] = fileCase{Name: c.Name, Key: c.Key}
			for _, r := range c.Rows {
				fc[i].Rows = append(fc[i].Rows, encodeRow(r))
			}
		}
		b, err := json.MarshalIndent(fc, "", "\t")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []fileCase
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(want) != len(got) {
		t.Fatalf("%s has %d cases, the test made %d", path, len(want), len(got))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name || g.Key != w.Key || len(g.Rows) != len(w.Rows) {
			t.Errorf("case %d: got %q (key %q, %d rows), golden %q (%q, %d)", i, g.Name, g.Key, len(g.Rows), w.Name, w.Key, len(w.Rows))
			continue
		}
		values, differ, worst := 0, 0, 0.0
		for j, s := range w.Rows {
			wr, gr := decodeRow(t, s), g.Rows[j]
			if len(gr) != len(wr) {
				t.Fatalf("%s: row %d has %d values, golden %d", w.Name, j, len(gr), len(wr))
			}
			for k := range gr {
				values++
				if math.Float32bits(gr[k]) != math.Float32bits(wr[k]) {
					differ++
					worst = math.Max(worst, math.Abs(float64(gr[k]-wr[k])))
				}
			}
		}
		t.Logf("%s: %d of %d values bit-identical to %s (max diff %.2g)", w.Name, values-differ, values, path, worst)
		if differ > 0 && (*exact || worst > tolerance) {
			t.Errorf("%s: %d of %d values differ from %s, max diff %.2g", w.Name, differ, values, path, worst)
		}
	}
}

// Concurrently runs f(0) … f(n-1) on n goroutines released at the same
// moment and returns the errors they returned.
func Concurrently(n int, f func(g int) error) []error {
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for g := range n {
		wg.Go(func() {
			<-start
			errs[g] = f(g)
		})
	}
	close(start)
	wg.Wait()
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}
