package onnx

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	ortgo "github.com/yalue/onnxruntime_go"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
)

func refPython(t *testing.T, modules ...string) (python, tools string) {
	t.Helper()
	python = filepath.Join(home.Dir(), "venv", "bin", "python")
	for _, m := range modules {
		if err := exec.Command(python, "-c", "import "+m).Run(); err != nil {
			t.Skipf("no %s in %s (make pydeps): %v", m, python, err)
		}
	}
	tools, err := filepath.Abs(filepath.Join("..", "..", "tools"))
	if err != nil {
		t.Fatal(err)
	}
	return python, tools
}

func readF32(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestDecodersMatchTransformers: tiny random Llama and Mistral models made
// by transformers (tools/decoder_reference.py), imported from their
// safetensors and run by ONNX Runtime through anna's graph, give
// transformers' last hidden states (<= 1e-4) on every real token of a
// right-padded batch.
func TestDecodersMatchTransformers(t *testing.T) {
	needORT(t)
	python, tools := refPython(t, "torch", "transformers")
	for i, arch := range []string{"llama", "mistral"} {
		t.Run(arch, func(t *testing.T) {
			dir := t.TempDir()
			ids := [][]int64{{5, 17, 3, 60, 22, 9, 41, 2}, {7, 33, 12, 2, 0, 0, 0, 0}}
			mask := [][]int64{{1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0, 0}}
			b, _ := json.Marshal(map[string]any{"ids": ids, "mask": mask})
			os.WriteFile(filepath.Join(dir, "ids.json"), b, 0o644)
			if out, err := exec.Command(python, filepath.Join(tools, "decoder_reference.py"), "tiny", arch, fmt.Sprint(70+i), dir).CombinedOutput(); err != nil {
				t.Fatalf("decoder_reference.py: %v\n%s", err, out)
			}
			cfg, err := model.LoadConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			tensors, err := ReadCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			g, err := Build(cfg, tensors, model.TaskEmbed)
			if err != nil {
				t.Fatal(err)
			}
			var flat, fm, types []int64
			for r := range ids {
				flat = append(flat, ids[r]...)
				fm = append(fm, mask[r]...)
				types = append(types, make([]int64, len(ids[r]))...)
			}
			B, S, H := len(ids), len(ids[0]), cfg.HiddenSize
			got := runModel(t, graphBytes(t, g), OutputHidden, flat, types, fm, B, S, ortgo.NewShape(int64(B), int64(S), int64(H)))
			want := readF32(t, filepath.Join(dir, "hidden.f32"))
			worst := 0.0
			for r := 0; r < B; r++ {
				for s := 0; s < S; s++ {
					if mask[r][s] == 0 {
						continue
					}
					for j := 0; j < H; j++ {
						k := (r*S+s)*H + j
						worst = math.Max(worst, math.Abs(float64(got[k]-want[k])))
					}
				}
			}
			t.Logf("%s: max abs difference %.2g", arch, worst)
			if worst > 1e-4 {
				t.Errorf("%s: hidden states differ from transformers' by %g", arch, worst)
			}
		})
	}
}

func graphBytes(t *testing.T, g *Graph) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := g.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
