package catalog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/model/installed"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model"
)

// Precisions an index can be built at (annactl index --precision).
const (
	// PrecisionAuto is a model's default precision: int8 for the
	// catalogue encoders whose int8 graph was measured within 0.005
	// nDCG@10 of the float32 one on SciFact (Entry.Int8Default), float32
	// for every other model.
	PrecisionAuto    = ""
	PrecisionInt8    = model.QuantizeInt8
	PrecisionFloat32 = "float32"
)

// CheckPrecision accepts PrecisionAuto, PrecisionInt8 and
// PrecisionFloat32.
func CheckPrecision(p string) error {
	switch p {
	case PrecisionAuto, PrecisionInt8, PrecisionFloat32:
		return nil
	}
	return fmt.Errorf("precision %q: want %s or %s (or leave it out for the model's default)", p, PrecisionInt8, PrecisionFloat32)
}

// ErrNoInt8 is returned (wrapped) by WithPrecision when int8 is asked of
// a model the catalogue cannot quantize.
var ErrNoInt8 = errors.New("no int8 form of this model")

// WithPrecision returns the installed model directory that embeds at
// precision p for the model in dir (an installed model directory):
//
//   - for an int8 model and PrecisionFloat32, the float32 model of the
//     same name (NAME for NAME-int8) beside it, when installed;
//   - dir itself when p is PrecisionFloat32 and dir is a float32 model,
//     when dir is already an int8 model and p is not PrecisionFloat32, and
//     when p is PrecisionAuto and dir is not a catalogue encoder with
//     Entry.Int8Default;
//   - for a float32 catalogue encoder (its manifest names the entry) and
//     p PrecisionInt8, or PrecisionAuto with Entry.Int8Default: the
//     NAME-int8 model beside dir (InstalledName), imported first when it
//     is missing — from SourceDir(sources, entry), the entry's unpacked
//     members (`make setup` keeps the default model's there), when it holds
//     them, else downloaded as Install does with opts (opts.ModelsDir
//     defaults to dir's parent) — and likewise when NAME-int8 is an int8
//     model converted before issue 64 (Manifest.Activations ""), which is
//     kept aside as NAME-int8-FINGERPRINT12 for the indexes built with it
//     (installed.Replace). The import is written beside its destination
//     and renamed into place, so a crash or a concurrent import leaves
//     either no model or a whole one.
//
// An int8 model asked for float32, or int8 asked of a model that is not a
// catalogue encoder, is an error naming the model and what to do.
func WithPrecision(ctx context.Context, dir, p, sources string, opts Options) (string, error) {
	ctx = safe.Ctx(ctx)
	if err := CheckPrecision(p); err != nil {
		return "", err
	}
	man, err := model.LoadManifest(dir)
	if err != nil {
		return "", err
	}
	if man.Quantization != "" {
		if p == PrecisionFloat32 {
			base := strings.TrimSuffix(man.Name, "-"+man.Quantization)
			float := filepath.Join(filepath.Dir(dir), base)
			if m, err := model.LoadManifest(float); err == nil && m.Quantization == "" && m.Name == base {
				return float, nil
			}
			return "", hint.Errorf(hint.Action{Kind: hint.InstallModel, Model: base}, "%s holds %s, an %s model, and its float32 model %s is not installed beside it for precision %s",
				dir, man.Name, man.Quantization, base, p)
		}
		if p == PrecisionInt8 && man.Quantization != model.QuantizeInt8 {
			return "", fmt.Errorf("%s holds %s, an %s model, not int8", dir, man.Name, man.Quantization)
		}
		return dir, nil
	}
	if p == PrecisionFloat32 {
		return dir, nil
	}
	e, err := Lookup(man.Name)
	if err != nil || e.Decoder || (p == PrecisionAuto && !e.Int8Default) {
		if p == PrecisionAuto {
			return dir, nil
		}
		return "", hint.Wrap(fmt.Errorf("%s (%s): %w: precision int8 is for the catalogue's encoders (List); convert its checkpoint quantized to int8 instead", dir, man.Name, ErrNoInt8),
			hint.Action{Kind: hint.ImportModel, Option: "quantize", Value: "int8"}, hint.Action{Kind: hint.ListModels})
	}
	if opts.ModelsDir == "" {
		opts.ModelsDir = filepath.Dir(dir)
	}
	name := InstalledName(e, model.QuantizeInt8)
	dest := filepath.Join(opts.ModelsDir, name)
	if current(dest) {
		return dest, nil
	}
	scratch, err := os.MkdirTemp(opts.ModelsDir, "."+name+".install-")
	if err != nil {
		return "", fmt.Errorf("catalog: %w", err)
	}
	defer os.RemoveAll(scratch)
	o := opts
	o.ModelsDir, o.Quantize = scratch, model.QuantizeInt8
	if src := SourceDir(sources, e); sources != "" && hasMembers(src, e) {
		_, err = Import(ctx, e, src, o)
	} else {
		_, err = Install(ctx, e, o)
	}
	if err != nil {
		return "", err
	}
	// Another process may have installed it meanwhile: keep theirs.
	if current(dest) {
		return dest, nil
	}
	if _, err := installed.Replace(filepath.Join(scratch, name), opts.ModelsDir, name); err != nil {
		return "", fmt.Errorf("catalog: %w", err)
	}
	return dest, nil
}

// current reports whether dir holds an int8 model converted as this build
// converts (every activation quantized per row): one converted before
// issue 64 serves the indexes built with it, but new ones are built with
// a new conversion (which installed.Replace installs, keeping the old one
// aside for them).
func current(dir string) bool {
	m, err := model.LoadManifest(dir)
	return err == nil && m.Quantization == model.QuantizeInt8 && m.Activations == model.ActivationsRow
}

// SourceDir is where e's unpacked archive members are kept under
// sources ($ANNA_HOME/src): the archive's file name without its
// extension.
func SourceDir(sources string, e Entry) string {
	base := filepath.Base(e.URL)
	for _, ext := range []string{".tgz", ".tar.gz", ".jar", ".whl", ".zip"} {
		base = strings.TrimSuffix(base, ext)
	}
	return filepath.Join(sources, base)
}

// hasMembers reports whether src holds every file e's import reads.
func hasMembers(src string, e Entry) bool {
	for _, name := range e.members {
		if _, err := os.Stat(filepath.Join(src, name)); err != nil {
			return false
		}
	}
	return true
}
