package setup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/internal/archive"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/installed"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/catalog"
)

// licenseMember is the npm package's licence file, kept beside the model's
// source files.
const licenseMember = "package/LICENSE"

// defaultEntry is the catalogue's default model (all-MiniLM-L6-v2).
func defaultEntry() (catalog.Entry, error) {
	for _, e := range catalog.Entries() {
		if e.Default {
			return e, nil
		}
	}
	return catalog.Entry{}, errors.New("setup: the catalogue has no default model")
}

// DefaultModel installs Options.Model (default: the catalogue's default
// entry, all-MiniLM-L6-v2) as
// Paths.Models/<name> and returns its manifest. The archive is downloaded
// only when the source folder (Paths.Sources/<archive name without .tgz>)
// is not there; it is unpacked aside and renamed into place. The model is
// converted into a scratch folder and replaces the installed one only when
// the fingerprints differ (see the package doc), keeping the one it
// replaces aside for the indexes built with it (installed.Replace). With
// the zero Options.Model, the model that embeds when none is named
// (home.DefaultEmbedName) is installed too when it is another entry.
func DefaultModel(ctx context.Context, o Options) (*model.Manifest, error) {
	ctx = safe.Ctx(ctx)
	e := o.Model
	if e.URL == "" {
		var err error
		if e, err = defaultEntry(); err != nil {
			return nil, err
		}
	}
	m, err := installEntry(ctx, o, e, licenseMember)
	if err != nil || o.Model.URL != "" || home.DefaultEmbedName == e.Name {
		return m, err
	}
	// The model that embeds when none is named, when it is another entry
	// (home.DefaultEmbedName).
	embed, err := catalog.Lookup(home.DefaultEmbedName)
	if err != nil {
		return nil, fmt.Errorf("setup: the default embedding model: %w", err)
	}
	if _, err := installEntry(ctx, o, embed, ""); err != nil {
		return nil, err
	}
	return m, nil
}

// installEntry installs e's float32 form, and its int8 one when it is
// Int8Default, from its source folder (Paths.Sources), which it unpacks
// from e's archive first when missing — with the archive member license
// as LICENSE when given.
func installEntry(ctx context.Context, o Options, e catalog.Entry, license string) (*model.Manifest, error) {
	src := catalog.SourceDir(o.Paths.Sources, e)
	members := e.Members()
	if license != "" {
		members[license] = "LICENSE"
	}
	if !allExist(src, members) {
		if err := unpackSource(ctx, o, e, members, src); err != nil {
			return nil, err
		}
	}
	o.logf("model source: %s", src)

	if err := os.MkdirAll(o.Paths.Models, 0o755); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	m, err := installForm(ctx, o, e, src, "")
	if err != nil || !e.Int8Default {
		return m, err
	}
	// Indexes are built at int8 by default (catalog.WithPrecision): the
	// int8 form too, so that the first index need not convert it.
	if _, err := installForm(ctx, o, e, src, model.QuantizeInt8); err != nil {
		return nil, err
	}
	return m, nil
}

// installForm converts e from src at quantization q ("" float32) and
// installs it, unless the installed one has the same fingerprint.
func installForm(ctx context.Context, o Options, e catalog.Entry, src, q string) (*model.Manifest, error) {
	scratch, err := os.MkdirTemp(o.Paths.Models, ".setup-")
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	defer os.RemoveAll(scratch)
	name := catalog.InstalledName(e, q)
	m, err := catalog.Import(ctx, e, src, catalog.Options{ModelsDir: scratch, Quantize: q})
	if err != nil {
		return nil, fmt.Errorf("setup: converting %s from %s: %w", name, src, err)
	}
	dest := filepath.Join(o.Paths.Models, name)
	old, err := model.LoadManifest(dest)
	if err == nil && old.Fingerprint == m.Fingerprint {
		o.logf("model %s: %s (installed, graph %s)", name, dest, m.ShortFingerprint())
		return old, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	kept, err := installed.Replace(filepath.Join(scratch, name), o.Paths.Models, name)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	if kept != "" {
		o.logf("model %s: the graph installed before (%s) kept as %s for the indexes built with it (reindexing one with the model %s moves it to this build's)", name, old.ShortFingerprint(), kept, name)
	}
	o.logf("model %s: installed the graph of this build (%s) at %s", name, m.ShortFingerprint(), dest)
	return m, nil
}

// unpackSource downloads e and takes members out of it into src, through a
// folder beside it renamed into place.
func unpackSource(ctx context.Context, o Options, e catalog.Entry, members map[string]string, src string) error {
	pkg, cleanup, err := o.download(ctx, e)
	if err != nil {
		return err
	}
	defer cleanup()
	if err := os.MkdirAll(o.Paths.Sources, 0o755); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	tmp, err := os.MkdirTemp(o.Paths.Sources, "."+filepath.Base(src)+".setup-")
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := archive.ExtractContext(ctx, pkg, members, tmp); err != nil {
		return fmt.Errorf("setup: %s from %s: %w", e.Name, e.URL, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := atomicfile.ReplaceDir(tmp, src); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return nil
}

// allExist reports whether dir holds every file members names.
func allExist(dir string, members map[string]string) bool {
	for _, name := range members {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}
