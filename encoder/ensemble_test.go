package encoder

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
)

// An ensemble's vector is its parts' own vectors, each scaled by
// √(wᵢ/Σw), joined: its dot products are the weighted mean of the parts'
// cosines, for documents and for queries (each part with its own prefix).
func TestEnsembleIsItsPartsWeighted(t *testing.T) {
	ctx := context.Background()
	a := testModel(t)
	b, err := home.RequireDefaultEmbedModel() // the int8 form: another fingerprint
	if err != nil {
		t.Skipf("no int8 default model installed: %v", err)
	}
	weights := []float64{1, 3}
	man, err := NewEnsemble("pair", []model.EnsemblePart{{Path: a, Weight: weights[0]}, {Path: b, Weight: weights[1]}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := model.WriteManifest(dir, man); err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ens, ok := c.(*Ensemble)
	if !ok {
		t.Fatalf("Open of an ensemble gave %T", c)
	}
	if ens.Dim() != 2*384 || ens.Fingerprint() != man.Fingerprint {
		t.Fatalf("dim %d fingerprint %.12s, want 768 and %.12s", ens.Dim(), ens.Fingerprint(), man.Fingerprint)
	}
	docs := []string{"nearest neighbour graphs for vector search", "bread is baked from flour and water"}
	query := []string{"how are vectors searched"}
	ed, err := ens.EmbedDocuments(ctx, docs)
	if err != nil {
		t.Fatal(err)
	}
	eq, err := ens.EmbedQueries(ctx, query, Prompt{})
	if err != nil {
		t.Fatal(err)
	}
	var want [2]float64 // the weighted mean of the parts' cosines, per document
	for j, p := range ens.Parts() {
		pd, err := p.EmbedDocuments(ctx, docs)
		if err != nil {
			t.Fatal(err)
		}
		pq, err := p.EmbedQueries(ctx, query, Prompt{})
		if err != nil {
			t.Fatal(err)
		}
		s := float32(math.Sqrt(weights[j] / 4))
		for i := range docs {
			got := ed[i][j*384 : (j+1)*384]
			for k, x := range pd[i] {
				if math.Abs(float64(got[k]-s*x)) > 1e-6 {
					t.Fatalf("part %d, document %d, value %d: %v, want %v", j, i, k, got[k], s*x)
				}
			}
			want[i] += weights[j] / 4 * dot(pq[0], pd[i])
		}
	}
	for i := range docs {
		if n := dot(ed[i], ed[i]); math.Abs(n-1) > 1e-5 {
			t.Errorf("document %d: |v|² = %v, want 1", i, n)
		}
		if got := dot(eq[0], ed[i]); math.Abs(got-want[i]) > 1e-5 {
			t.Errorf("document %d: the ensemble's cosine %v, the parts' weighted mean %v", i, got, want[i])
		}
	}
	if sp, ok := SplitterOf(ens); !ok || sp.MaxLength() != 256 {
		t.Errorf("the ensemble should split documents by its parts' least window (256)")
	}

	// Load, which opens one model, says what to use instead.
	if _, err := Load(ctx, dir, Options{}); err == nil || !strings.Contains(err.Error(), "encoder.Open") {
		t.Errorf("Load of an ensemble: %v, want a pointer to Open", err)
	}
	// Another weight is another fingerprint; a manifest whose fingerprint
	// does not match its parts and weights is refused.
	other, err := NewEnsemble("pair", []model.EnsemblePart{{Path: a, Weight: 1}, {Path: b, Weight: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if other.Fingerprint == man.Fingerprint {
		t.Error("the weights do not change the fingerprint")
	}
	other.Fingerprint = man.Fingerprint
	if err := other.Validate(); err == nil || !strings.Contains(err.Error(), "fingerprint") {
		t.Errorf("a manifest with another ensemble's fingerprint: %v", err)
	}
	// A part that is not the model recorded is refused, naming it.
	moved := *man
	moved.Ensemble = &model.Ensemble{Parts: []model.EnsemblePart{man.Ensemble.Parts[1], man.Ensemble.Parts[0]}}
	moved.Ensemble.Parts[0].Path, moved.Ensemble.Parts[1].Path = a, b // each path now holds the other's model
	moved.Fingerprint = model.EnsembleFingerprint(moved.Ensemble.Parts)
	bad := t.TempDir()
	if err := model.WriteManifest(bad, &moved); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, bad, Options{}); err == nil || !strings.Contains(err.Error(), filepath.Base(a)) {
		t.Errorf("an ensemble whose part holds another model: %v", err)
	}
}

// An ensemble reads a language any of its parts reads; a part of every
// language makes it one; a part of unknown languages makes its unknown.
func TestEnsembleLanguages(t *testing.T) {
	for _, c := range []struct {
		parts [][]string
		want  []string
	}{
		{[][]string{{"en"}, {"en"}}, []string{"en"}},
		{[][]string{{"en"}, {"*"}}, []string{"*"}},
		{[][]string{{"en"}, {"de", "en"}}, []string{"de", "en"}},
		{[][]string{{"en"}, nil}, nil},
	} {
		if got := ensembleLanguages(c.parts); !slices.Equal(got, c.want) {
			t.Errorf("%v: %v, want %v", c.parts, got, c.want)
		}
	}
}
