package engine_test

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRuntimeLinksNoConverter: the runtime (engine, encoder, rerank,
// internal/inference, and the server built on them) links neither the converter
// (internal/model/onnx), GGUF, the catalogue's downloads, the trainer, report nor
// gonum, nor the pipelines that drive the engine from outside (mining,
// eval, ingest, doc2query). Each offending package is named with the
// runtime packages that import it.
func TestRuntimeLinksNoConverter(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	const mod = "github.com/anna-search/anna/"
	runtime := []string{mod + "engine", mod + "encoder", mod + "rerank", mod + "internal/inference", mod + "server"}
	forbidden := func(p string) bool {
		for _, f := range []string{"internal/model/onnx", "internal/model/gguf", "model/catalog", "train", "report", "mining", "eval", "ingest", "doc2query"} {
			if p == mod+f || strings.HasPrefix(p, mod+f+"/") {
				return true
			}
		}
		return strings.HasPrefix(p, "gonum.org/")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, runtime...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errb.String())
	}
	importers := map[string][]string{} // forbidden package → the packages importing it
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || forbidden(f[0]) {
			continue
		}
		for _, imp := range f[1:] {
			if forbidden(imp) {
				importers[imp] = append(importers[imp], f[0])
			}
		}
	}
	for p, by := range importers {
		t.Errorf("the runtime links %s (imported by %s)", p, strings.Join(by, ", "))
	}
}
