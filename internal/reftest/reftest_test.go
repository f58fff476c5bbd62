package reftest

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A golden file unpacks to what was packed, and packing is deterministic.
func TestGoldenRoundTrip(t *testing.T) {
	m := manifest{Tool: "x.py", Sources: map[string]string{"x.py": "ab"}, MadeWith: "Python 3",
		Cases: []manifestCase{{Name: "a", Inputs: map[string]string{"in.json": "cd"}, Outputs: []string{"out.bin"}}}}
	files := map[string][]byte{"a/out.bin": {1, 2, 3}}
	b1, err := writeGolden(m, files)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := writeGolden(m, files)
	if string(b1) != string(b2) {
		t.Error("the same content packed twice differs")
	}
	path := filepath.Join(t.TempDir(), "x.golden")
	os.WriteFile(path, b1, 0o644)
	got, gotFiles, err := readGolden(path)
	if err != nil {
		t.Fatal(err)
	}
	if staleness(got, m) != nil || got.MadeWith != m.MadeWith || !sameFiles(gotFiles, files) {
		t.Errorf("read back %+v %v", got, gotFiles)
	}
	os.WriteFile(path, []byte("not gzip"), 0o644)
	if _, _, err := readGolden(path); err == nil || !strings.Contains(err.Error(), "not a golden file") {
		t.Errorf("a corrupt file: %v", err)
	}
}

// Staleness names each changed tool source, case and input.
func TestStaleness(t *testing.T) {
	base := func() manifest {
		return manifest{Tool: "x.py", Sources: map[string]string{"x.py": "1", "common.py": "2"},
			Cases: []manifestCase{
				{Name: "a", Inputs: map[string]string{"model.safetensors": "3", "batch.json": "4"}, Outputs: []string{"grads.safetensors"}},
				{Name: "b", Inputs: map[string]string{"model.safetensors": "5"}, Outputs: []string{"grads.safetensors"}},
			}}
	}
	if s := staleness(base(), base()); s != nil {
		t.Fatalf("identical manifests: %v", s)
	}
	now := base()
	now.Sources["common.py"] = "9"
	now.Cases[0].Inputs["batch.json"] = "9"
	delete(now.Cases[0].Inputs, "model.safetensors")
	now.Cases[0].Inputs["config.json"] = "1"
	now.Cases[1].Name = "c"
	got := strings.Join(staleness(base(), now), "; ")
	for _, want := range []string{"tools/common.py changed", "case a's inputs batch.json changed, config.json is new, model.safetensors is gone",
		"case c is new", "case b is no longer tested"} {
		if !strings.Contains(got, want) {
			t.Errorf("staleness %q lacks %q", got, want)
		}
	}
}

// A tool's sources are itself and, transitively, the files of its folder
// that it imports or names in quotes; a docstring's mention is not one.
func TestToolSources(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"main_ref.py":  "\"\"\"Uses common; see other_ref.py.\"\"\"\nimport os\nfrom common import x\nTOOL = \"helper.py\"\n",
		"common.py":    "import json\nimport deep\n",
		"deep.py":      "",
		"helper.py":    "",
		"other_ref.py": "",
	} {
		os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644)
	}
	got, err := toolSources(filepath.Join(dir, "main_ref.py"))
	if err != nil {
		t.Fatal(err)
	}
	names := sortedKeys(got)
	if want := []string{"common.py", "deep.py", "helper.py", "main_ref.py"}; !slices.Equal(names, want) {
		t.Errorf("sources %v, want %v", names, want)
	}
	if _, err := toolSources(filepath.Join(dir, "missing.py")); err == nil {
		t.Error("a missing tool: no error")
	}
}

// JSON inputs hash the same whatever their key order and spacing; other
// files by their bytes.
func TestHashInputs(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(a, "job.json"), []byte(`{"b": [1, 2.50], "a": "x"}`), 0o644)
	os.WriteFile(filepath.Join(b, "job.json"), []byte(`{"a":"x","b":[1,2.50]}`), 0o644)
	ha, err := hashInputs(a)
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := hashInputs(b)
	if ha["job.json"] != hb["job.json"] {
		t.Error("the same JSON in another order hashes differently")
	}
	os.WriteFile(filepath.Join(b, "job.json"), []byte(`{"a":"x","b":[1,2.5]}`), 0o644)
	if hb, _ = hashInputs(b); ha["job.json"] == hb["job.json"] {
		t.Error("another number hashes the same")
	}
	os.Mkdir(filepath.Join(b, "sub"), 0o755)
	if _, err := hashInputs(b); err == nil {
		t.Error("a folder among the inputs: no error")
	}
}

func TestRelErr(t *testing.T) {
	for _, c := range []struct {
		got, want []float32
		floor     float64
		rel       float64
		bad       int
	}{
		{[]float32{3, 4}, []float32{3, 4}, 0, 0, -1},
		{[]float32{3, 5}, []float32{3, 4}, 0, 0.2, -1},
		{[]float32{0, 1e-3}, []float32{0, 0}, 0, math.Inf(1), -1},
		{[]float32{0, 0}, []float32{0, 0}, 0, 0, -1},
		{[]float32{0, 1e-3}, []float32{0, 0}, 0.5, 2e-3, -1},
		{[]float32{1, float32(math.NaN())}, []float32{1, 1}, 0, math.NaN(), 1},
		{[]float32{1}, []float32{1, 1}, 0, math.Inf(1), -1},
	} {
		rel, bad := RelErr(c.got, c.want, c.floor)
		if bad != c.bad || !(math.Abs(rel-c.rel) < 1e-6 || rel == c.rel || math.IsNaN(rel) && math.IsNaN(c.rel)) {
			t.Errorf("RelErr(%v, %v, %g) = %g, %d; want %g, %d", c.got, c.want, c.floor, rel, bad, c.rel, c.bad)
		}
	}
}

// Padded's sequences are right-padded, the first full, lengths in range,
// ids in [lo, vocab); PaddedZero leaves the padding's ids 0.
func TestPadded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, zero := range []bool{false, true} {
		f := Padded
		if zero {
			f = PaddedZero
		}
		s := f(r, 50, 9, 3, 20, func(i int) int { return 2 + i%3 })
		if s.Lens[0] != 9 {
			t.Errorf("first length %d, want 9", s.Lens[0])
		}
		for i, L := range s.Lens {
			if L < 2+i%3 || L > 9 {
				t.Errorf("sequence %d: length %d", i, L)
			}
			for p := range 9 {
				id, m := s.IDs[i*9+p], s.Mask[i*9+p]
				if (p < L) != (m == 1) {
					t.Fatalf("sequence %d: mask %v at %d for length %d", i, m, p, L)
				}
				if (p < L || !zero) && (id < 3 || id >= 20) || p >= L && zero && id != 0 {
					t.Fatalf("sequence %d position %d (length %d): id %d", i, p, L, id)
				}
			}
		}
	}
	types := Seqs{N: 2, T: 4, Lens: []int{4, 3}}.PairTypes()
	if want := []int32{0, 0, 1, 1, 0, 1, 1, 0}; !slices.Equal(types, want) {
		t.Errorf("pair types %v, want %v", types, want)
	}
	if rows := Rows([]int{1, 2, 3, 4, 5, 6}, 3); len(rows) != 2 || rows[1][0] != 4 {
		t.Errorf("rows %v", rows)
	}
}
