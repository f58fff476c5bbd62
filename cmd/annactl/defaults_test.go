package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/server"
)

// TestOneDefault (issue 64): the library's zero Options, annactl index and
// annactl embed pick the same model — the default model's int8 form
// (home.DefaultEmbedModel) — so a directory indexed by one and opened by
// the other reports and uses the model it was built with (nothing
// rebuilt, nothing logged); Options.Model takes an installed model's name
// as --model does, and an unknown name is refused naming where it was
// looked for.
func TestOneDefault(t *testing.T) {
	def, err := home.RequireDefaultEmbedModel()
	if err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	tmp := t.TempDir()
	corpus := writeCorpus(t, tmp, 12, 30, 1)

	// The library, zero Options.
	lib := filepath.Join(tmp, "lib")
	eng, err := engine.Open(ctx, lib, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Add(ctx, []engine.Document{{ID: "a", Text: "nearest neighbour graphs"}}); err != nil {
		t.Fatal(err)
	}
	libModel := eng.Model()
	eng.Close()
	if dm, err := model.LoadManifest(def); err != nil || libModel.Fingerprint != dm.Fingerprint || libModel.Name != filepath.Base(def) {
		t.Errorf("the library's default: %+v, want the model in %s (%v)", libModel, def, err)
	}

	// annactl index, no --model.
	cli := filepath.Join(tmp, "cli")
	mustRun(t, "index", "--index", cli, corpus)
	rec, err := engine.RecordedModel(cli)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Fingerprint != libModel.Fingerprint || rec.Name != libModel.Name {
		t.Errorf("annactl index built %s, the library %s", rec.Label(), libModel.Label())
	}

	// The CLI's index opened by the library: its own model, nothing
	// rebuilt or logged, in Model and Stats alike.
	var logged []string
	eng, err = engine.Open(ctx, cli, engine.Options{Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Search(ctx, "graphs", engine.SearchOptions{Mode: engine.ModeHybrid, K: 3}); err != nil {
		t.Fatal(err)
	}
	st, err := eng.Stats()
	if err != nil {
		t.Fatal(err)
	}
	eng.Close()
	if st.Model.Fingerprint != rec.Fingerprint || st.Model.Name != rec.Name || len(logged) > 0 {
		t.Errorf("the CLI's index through the library: stats model %s, logged %q; want %s and nothing logged", st.Model.Label(), logged, rec.Label())
	}

	// Options.Model takes a name; an unknown one says where it looked.
	named := filepath.Join(tmp, "named")
	eng, err = engine.Open(ctx, named, engine.Options{Model: filepath.Base(def)})
	if err != nil {
		t.Fatalf("Options.Model %q: %v", filepath.Base(def), err)
	}
	if m := eng.Model(); m.Fingerprint != libModel.Fingerprint || m.Dir != def || m.Name != libModel.Name {
		t.Errorf("Options.Model %q gave %+v", filepath.Base(def), m)
	}
	eng.Close()
	_, err = engine.Open(ctx, filepath.Join(tmp, "nope"), engine.Options{Model: "no-such-model"})
	var oe *engine.OptionError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), filepath.Join(home.ModelsDir(), "no-such-model")) || !strings.Contains(err.Error(), "installed: ") {
		t.Errorf("an unknown model name: %v, want an OptionError naming where it looked and what is installed", err)
	}
	// annactl embed refuses it the same way.
	if r := annactl(t, "", "embed", "--model", "no-such-model"); r.code != 1 || !strings.Contains(r.stderr, filepath.Join(home.ModelsDir(), "no-such-model")) || !strings.Contains(r.stderr, "installed: ") {
		t.Errorf("embed --model no-such-model: %v, want exit 1 naming where it looked and what is installed", r)
	}

	// annactl embed, no --model: the library's vectors.
	texts := []string{"nearest neighbour graphs", "bread", "a longer text about how hierarchical navigable small world graphs are searched", "graphs"}
	var lines strings.Builder
	for i, s := range texts {
		fmt.Fprintf(&lines, "{\"id\": %d, \"text\": %q}\n", i, s)
	}
	r := annactl(t, lines.String(), "embed", "--cache=false")
	if r.code != 0 {
		t.Fatal(r)
	}
	cliVecs := embedLines(t, r.stdout)
	eng, enc := defaultEngine(t)
	libVecs, err := enc.EmbedDocuments(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range texts {
		if d := maxAbs(cliVecs[i], libVecs[i]); d > 1e-6 {
			t.Errorf("text %d: annactl embed and the library differ by %.2g", i, d)
		}
	}
}

// TestVectorIsItsOwnEverywhere (issue 64): with the default model, a
// text's vector is the same alone and batched with others through annactl
// embed, the library and the server's /v1/embeddings (within 1e-6).
func TestVectorIsItsOwnEverywhere(t *testing.T) {
	def, err := home.RequireDefaultEmbedModel()
	if err != nil {
		t.Skip(err)
	}
	if m, err := model.LoadManifest(def); err != nil || m.Activations != model.ActivationsRow {
		t.Skipf("the installed default model %s is a conversion from before per-row activations (%v): anna-env setup converts it again", def, err)
	}
	ctx := context.Background()
	target := "nearest neighbour graphs"
	others := []string{"bread", "a considerably longer text about hierarchical navigable small world graphs, searched greedily from the top layer down", "graphs of nearest neighbours"}
	var ref []float32
	check := func(how string, v []float32) {
		t.Helper()
		if ref == nil {
			ref = v
			return
		}
		if d := maxAbs(v, ref); d > 1e-6 {
			t.Errorf("%s: the vector differs from annactl embed's of the text alone by %.3g", how, d)
		}
	}
	for i := 0; i <= len(others); i++ {
		var in strings.Builder
		for j, s := range append([]string{target}, others[:i]...) {
			fmt.Fprintf(&in, "{\"id\": %d, \"text\": %q}\n", j, s)
		}
		r := annactl(t, in.String(), "embed", "--cache=false")
		if r.code != 0 {
			t.Fatal(r)
		}
		check(fmt.Sprintf("annactl embed with %d others", i), embedLines(t, r.stdout)[0])
	}
	eng, enc := defaultEngine(t)
	for i := 0; i <= len(others); i++ {
		v, err := enc.EmbedDocuments(ctx, append(append([]string(nil), others[:i]...), target))
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("the library with %d others", i), v[i])
	}
	srv, err := server.New(eng, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	for i := 0; i <= len(others); i++ {
		body, _ := json.Marshal(map[string]any{"input": append([]string{target}, others[:i]...)})
		resp, err := http.Post(hs.URL+"/v1/embeddings", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Data []struct {
				Embedding []float32 `json:"embedding"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || len(out.Data) != i+1 {
			t.Fatalf("/v1/embeddings: %s, %v, %d vectors", resp.Status, err, len(out.Data))
		}
		check(fmt.Sprintf("/v1/embeddings with %d others", i), out.Data[0].Embedding)
	}
}

// defaultEngine opens an engine on an empty directory with the zero
// Options (closed when the test ends) and loads its encoder.
func defaultEngine(t *testing.T) (*engine.Engine, encoder.Encoder) {
	t.Helper()
	ctx := context.Background()
	eng, err := engine.Open(ctx, t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	enc, err := eng.Teacher().LoadEncoder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return eng, enc
}

// embedLines reads annactl embed's JSON lines output.
func embedLines(t *testing.T, out string) [][]float32 {
	t.Helper()
	var vecs [][]float32
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			Embedding []float32 `json:"embedding"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		vecs = append(vecs, rec.Embedding)
	}
	return vecs
}

func maxAbs(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i]-b[i])))
	}
	return m
}
