// Package installed keeps the models installed under a models directory
// ($ANNA_HOME/models, one directory each): it installs a model directory
// made here under a name (Add, `annactl models add DIR NAME`), keeps one by
// content (Keep: installed once per fingerprint, as NAME-FINGERPRINT12),
// installs a new conversion of a model over its name while keeping the old
// one aside (Replace) and finds an installed model by its fingerprint
// (Find), which is how an engine directory finds its model again after the
// directory it was built from moved or was converted again. It reads manifests and copies files: it links neither the
// converter (internal/model/onnx) nor the catalogue's downloads (model/catalog), so
// the runtime (engine) can use it.
//
// Invariants:
//
//   - Add installs a copy only when every file the source's manifest lists
//     came through with its sha256; otherwise nothing installed changes.
//   - Keep never overwrites another model that holds the name it would
//     use, and keeping a model that is already kept changes nothing.
//   - Replace never loses an installed model: one of another fingerprint
//     under the name is moved aside (NAME-FINGERPRINT12) first, unless
//     another installed model has its fingerprint.
//   - Find skips hidden entries, half-written copies (NAME.partial) and
//     what is not a model directory; of several with the fingerprint it
//     returns the first by name.
//
// Crash behaviour: Add copies into NAME.partial and renames it over NAME
// (internal/atomicfile.ReplaceDir), so a crash leaves the old install, the
// new one, or the old one under NAME.old; running it (or Keep) again
// finishes it.
//
// A nil context.Context given to a function of this package is
// context.Background().
package installed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/atomicfile"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model"
)

// Find returns the directory under modelsDir of an installed model whose
// manifest's fingerprint is fingerprint, and that manifest; "" and nil when
// none is. Entries that are not model directories, hidden ones and
// half-written copies (NAME.partial) are skipped; symbolic links are
// followed. When several hold the fingerprint, the first by name is
// returned. A missing modelsDir holds none; the error is for one that
// cannot be read.
func Find(modelsDir, fingerprint string) (string, *model.Manifest, error) {
	if fingerprint == "" {
		return "", nil, nil
	}
	entries, err := os.ReadDir(modelsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("installed: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".partial") {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		dir := filepath.Join(modelsDir, n)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		m, err := model.LoadManifest(dir)
		if err != nil || m.Fingerprint != fingerprint {
			continue
		}
		return dir, m, nil
	}
	return "", nil, nil
}

// aliases are the catalogue's other names of its models, by the name each
// is installed under: the one table, which model/catalog's entries read
// (Entry.Aliases, Lookup) and Resolve uses without linking the catalogue.
var aliases = map[string][]string{
	"multilingual-e5-small": {"multilingual"},
}

// Aliases returns the catalogue's other names of the model it installs as
// name (nil when none).
func Aliases(name string) []string { return slices.Clone(aliases[name]) }

// aliasOf returns the name the model called s is installed under when s
// is one of its aliases (letter case ignored, as the catalogue's Lookup
// does), else "".
func aliasOf(s string) string {
	for name, as := range aliases {
		if slices.ContainsFunc(as, func(a string) bool { return strings.EqualFold(a, s) }) {
			return name
		}
	}
	return ""
}

// Resolve returns the model directory s names: s itself when it is a path
// (it holds a path separator, or exists where it is named), else the
// installed model modelsDir/s, or modelsDir/NAME when s is an alias of the
// catalogue's model NAME ("multilingual") — how a model is named to
// annactl's --model and to the engine's Options.Model alike. "" resolves
// to "". A name found in none of these places is an error saying where it
// looked and which models are installed, with a hint to install it.
func Resolve(modelsDir, s string) (string, error) {
	if s == "" || strings.ContainsRune(s, filepath.Separator) {
		return s, nil
	}
	if _, err := os.Stat(s); err == nil {
		return s, nil
	}
	d := filepath.Join(modelsDir, s)
	if fi, err := os.Stat(d); err == nil && fi.IsDir() {
		return d, nil
	}
	var install string // a catalogue name, when s is an alias
	if name := aliasOf(s); name != "" {
		install = name
		if fi, err := os.Stat(filepath.Join(modelsDir, name)); err == nil && fi.IsDir() {
			return filepath.Join(modelsDir, name), nil
		}
		d += " (nor " + filepath.Join(modelsDir, name) + ", the catalogue's model it names)"
	}
	var names []string
	if entries, err := os.ReadDir(modelsDir); err == nil {
		for _, e := range entries {
			if n := e.Name(); e.IsDir() && !strings.HasPrefix(n, ".") && !strings.HasSuffix(n, ".partial") {
				names = append(names, n)
			}
		}
	}
	have := "none is installed"
	if len(names) > 0 {
		have = "installed: " + strings.Join(names, ", ")
	}
	return "", hint.Errorf(hint.Action{Kind: hint.InstallModel, Model: install}, "installed: model %q: no directory %s here, and no installed model %s (%s; the catalogue's models install by name)", s, s, d, have)
}

// Keep makes sure the model directory src is installed under modelsDir,
// so that what is bound to it by fingerprint (an engine directory) does
// not depend on src staying where it is. It returns the directory of an
// installed model whose manifest has src's fingerprint — src itself when
// src is one of the installed models — or, when none has, installs a copy
// of src with Add under the name KeepName(manifest) and returns that;
// copied says whether it copied. Its manifest is returned either way.
// Keeping a model that is already kept changes nothing, so a run
// interrupted while copying (Add writes aside and renames) is finished by
// running it again.
func Keep(ctx context.Context, src, modelsDir string) (dir string, m *model.Manifest, copied bool, err error) {
	ctx = safe.Ctx(ctx)
	sm, err := model.LoadManifest(src)
	if err != nil {
		return "", nil, false, err
	}
	if as, err1 := filepath.Abs(src); err1 == nil {
		if ad, err2 := filepath.Abs(modelsDir); err2 == nil && filepath.Dir(as) == ad {
			return as, sm, false, nil // src is an installed model
		}
	}
	if dir, m, err := Find(modelsDir, sm.Fingerprint); err != nil || dir != "" {
		return dir, m, false, err
	}
	for _, name := range []string{KeepName(sm), keepBase(sm) + "-" + sm.Fingerprint} {
		dest := filepath.Join(modelsDir, name)
		if _, err := os.Lstat(dest); err == nil {
			continue // another model by that name (Find would have found this one)
		}
		if err := os.MkdirAll(modelsDir, 0o755); err != nil {
			return "", nil, false, fmt.Errorf("installed: %w", err)
		}
		m, err := Add(ctx, src, modelsDir, name)
		if err != nil {
			return "", nil, false, err
		}
		return dest, m, true, nil
	}
	return "", nil, false, fmt.Errorf("installed: cannot keep %s under %s: %s and %s-FINGERPRINT are taken by other models", src, modelsDir, KeepName(sm), keepBase(sm))
}

// Replace installs the model directory dir (made beside modelsDir/name,
// on the same file system) as modelsDir/name, moving it there. A model of
// another fingerprint installed under that name is not lost: unless
// another installed model has its fingerprint, it is moved aside first to
// KeepName(its manifest) — where an engine directory bound to it finds it
// by fingerprint (as it finds what Keep kept), so an index built with an
// earlier conversion of a model keeps working after the model is converted
// again — and kept is that directory ("" when nothing was kept). Its
// manifest, name included, is left as it was.
//
// Crash behaviour: the old model is renamed aside, then dir renamed into
// place (internal/atomicfile.ReplaceDir); a crash in between leaves the
// name free and the old model kept, and running it again finishes it.
func Replace(dir, modelsDir, name string) (kept string, err error) {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return "", fmt.Errorf("installed: model name %q: want one path element", name)
	}
	nm, err := model.LoadManifest(dir)
	if err != nil {
		return "", err
	}
	dest := filepath.Join(modelsDir, name)
	if old, err := model.LoadManifest(dest); err == nil && old.Fingerprint != nm.Fingerprint {
		elsewhere, err := findOther(modelsDir, old.Fingerprint, name)
		if err != nil {
			return "", err
		}
		if !elsewhere {
			aside := filepath.Join(modelsDir, KeepName(old))
			if _, err := os.Lstat(aside); err == nil {
				aside = filepath.Join(modelsDir, keepBase(old)+"-"+old.Fingerprint)
			}
			if _, err := os.Lstat(aside); err == nil {
				return "", fmt.Errorf("installed: cannot keep %s (fingerprint %s) aside before replacing it: %s is taken by another model", dest, old.ShortFingerprint(), aside)
			}
			if err := os.Rename(dest, aside); err != nil {
				return "", fmt.Errorf("installed: keeping %s aside: %w", dest, err)
			}
			kept = aside
		}
	}
	if err := atomicfile.ReplaceDir(dir, dest); err != nil {
		return kept, fmt.Errorf("installed: installing %s: %w", dest, err)
	}
	return kept, nil
}

// findOther reports whether a model under modelsDir other than the one
// named except has fingerprint fp.
func findOther(modelsDir, fp, except string) (bool, error) {
	entries, err := os.ReadDir(modelsDir)
	if err != nil {
		return false, fmt.Errorf("installed: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		if n == except || strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".partial") {
			continue
		}
		if m, err := model.LoadManifest(filepath.Join(modelsDir, n)); err == nil && m.Fingerprint == fp {
			return true, nil
		}
	}
	return false, nil
}

// KeepName is the name Keep installs a copy of a model under: the
// manifest's name (characters other than letters, digits, '.', '_' and
// '-' made '-'; "model" when empty) and its short fingerprint, e.g.
// "model-5ac62f6b6ec2".
func KeepName(m *model.Manifest) string { return keepBase(m) + "-" + m.ShortFingerprint() }

func keepBase(m *model.Manifest) string {
	b := []byte(m.Name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	s := strings.Trim(string(b), ".-")
	if s == "" {
		s = "model"
	}
	return s
}

// Add installs a model directory made here — `annactl train`'s DIR/model,
// `annactl models import`'s DEST — as modelsDir/name, so that commands
// find it by name and `annactl models list` shows it. The directory's
// manifest must load; the copy is made under name.partial, each file
// hashed as it is written, and renamed over what was there
// (internal/atomicfile.ReplaceDir) only when every file the manifest lists came through
// with its sha256: otherwise nothing installed changes. The manifest's
// name becomes name; the fingerprint, which does not depend on it, is
// kept.
func Add(ctx context.Context, src, modelsDir, name string) (*model.Manifest, error) {
	ctx = safe.Ctx(ctx)
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return nil, fmt.Errorf("installed: model name %q: want one path element", name)
	}
	m, err := model.LoadManifest(src)
	if err != nil {
		return nil, err
	}
	if len(m.Files) == 0 && m.Ensemble == nil { // an ensemble is its manifest alone
		return nil, fmt.Errorf("installed: %s: the manifest lists no files", src)
	}
	dest := filepath.Join(modelsDir, name)
	as, err1 := filepath.Abs(src)
	ad, err2 := filepath.Abs(dest)
	if err1 == nil && err2 == nil && as == ad {
		return nil, fmt.Errorf("installed: %s is already installed as %s", src, name)
	}
	tmp := dest + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		return nil, fmt.Errorf("installed: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	sums := map[string]string{} // slash-separated path in the directory → sha256 of the copy
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		out := filepath.Join(tmp, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		case !d.Type().IsRegular():
			return fmt.Errorf("%s: not a regular file", path)
		}
		sum, err := atomicfile.CopySum(path, out)
		sums[filepath.ToSlash(rel)] = sum
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("installed: copying %s: %w", src, err)
	}
	for f, want := range m.Files {
		switch got, ok := sums[f]; {
		case !ok:
			return nil, fmt.Errorf("installed: %s: listed in the manifest, missing", filepath.Join(src, f))
		case got != want:
			return nil, fmt.Errorf("installed: %s: sha256 %s, the manifest says %s (the directory changed after it was written)", filepath.Join(src, f), got, want)
		}
	}
	m.Name = name
	if err := model.WriteManifest(tmp, m); err != nil {
		return nil, err
	}
	if err := atomicfile.ReplaceDir(tmp, dest); err != nil {
		return nil, fmt.Errorf("installed: %w", err)
	}
	ok = true
	return m, nil
}
