package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/home"
)

func TestEmbedCommand(t *testing.T) {
	dir, err := home.RequireDefaultModel()
	if err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	in := `{"id": 7, "text": "The cat sits outside"}` + "\n\n" + `{"id": "b", "text": "The dog plays in the garden"}` + "\n"
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"embed", "--model", dir, "--threads", "2"}, strings.NewReader(in), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var recs []struct {
		ID        json.RawMessage `json:"id"`
		Embedding []float32       `json:"embedding"`
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var one struct {
			ID        json.RawMessage `json:"id"`
			Embedding []float32       `json:"embedding"`
		}
		if err := json.Unmarshal(sc.Bytes(), &one); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		recs = append(recs, one)
	}
	if len(recs) != 2 || string(recs[0].ID) != "7" || string(recs[1].ID) != `"b"` || len(recs[0].Embedding) != 384 {
		t.Fatalf("output: %d records", len(recs))
	}
	var cos float64
	for i := range recs[0].Embedding {
		cos += float64(recs[0].Embedding[i]) * float64(recs[1].Embedding[i])
	}
	if math.Abs(cos-0.2838) > 5e-4 {
		t.Errorf("cosine of the published pair through the CLI: %.4f, want 0.2838", cos)
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr not silent in a pipe: %q", errOut.String())
	}

	// Binary: header then records with the same vectors.
	out.Reset()
	if code := run(ctx, []string{"embed", "--model", dir, "--format", "binary"}, strings.NewReader(in), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	b := out.Bytes()
	if string(b[:8]) != embedMagic || binary.LittleEndian.Uint32(b[8:]) != 384 || binary.LittleEndian.Uint32(b[12:]) != 1 {
		t.Fatalf("binary header % x", b[:16])
	}
	n := binary.LittleEndian.Uint32(b[16:])
	if string(b[20:20+n]) != "7" {
		t.Errorf("binary id %q", b[20:20+n])
	}
	first := math.Float32frombits(binary.LittleEndian.Uint32(b[20+n:]))
	if first != recs[0].Embedding[0] {
		t.Errorf("binary and JSON vectors differ: %v vs %v", first, recs[0].Embedding[0])
	}
	if want := 16 + 2*4 + 1 + 3 + 2*384*4; len(b) != want {
		t.Errorf("binary output is %d bytes, want %d", len(b), want)
	}

	// A bad line is named.
	bad := `{"id": 1, "text": "ok"}` + "\n" + `{"id": 2, "txt": "typo"}` + "\n"
	errOut.Reset()
	if code := run(ctx, []string{"embed", "--model", dir}, strings.NewReader(bad), &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "stdin:2") {
		t.Errorf("missing text field: exit %d, %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run(ctx, []string{"embed", "--model", dir}, strings.NewReader("{oops\n"), &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "stdin:1") {
		t.Errorf("bad JSON: exit %d, %q", code, errOut.String())
	}
}
