package catalog

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/onnx"
)

// Add installs a model directory made here — `annactl train`'s DIR/model,
// `annactl models import`'s DEST — as modelsDir/name, so that commands
// find it by name and `annactl models list` shows it. The directory's
// manifest must load; the copy is made under name.partial, each file
// hashed as it is written, and renamed over what was there
// (onnx.ReplaceDir) only when every file the manifest lists came through
// with its sha256: otherwise nothing installed changes. The manifest's
// name becomes name; the fingerprint, which does not depend on it, is
// kept.
func Add(ctx context.Context, src, modelsDir, name string) (*model.Manifest, error) {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return nil, fmt.Errorf("catalog: model name %q: want one path element", name)
	}
	m, err := model.LoadManifest(src)
	if err != nil {
		return nil, err
	}
	if len(m.Files) == 0 {
		return nil, fmt.Errorf("catalog: %s: the manifest lists no files", src)
	}
	dest := filepath.Join(modelsDir, name)
	as, err1 := filepath.Abs(src)
	ad, err2 := filepath.Abs(dest)
	if err1 == nil && err2 == nil && as == ad {
		return nil, fmt.Errorf("catalog: %s is already installed as %s", src, name)
	}
	tmp := dest + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
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
		sum, err := onnx.CopyFile(path, out)
		sums[filepath.ToSlash(rel)] = sum
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: copying %s: %w", src, err)
	}
	for f, want := range m.Files {
		switch got, ok := sums[f]; {
		case !ok:
			return nil, fmt.Errorf("catalog: %s: listed in the manifest, missing", filepath.Join(src, f))
		case got != want:
			return nil, fmt.Errorf("catalog: %s: sha256 %s, the manifest says %s (the directory changed after it was written)", filepath.Join(src, f), got, want)
		}
	}
	m.Name = name
	if err := model.WriteManifest(tmp, m); err != nil {
		return nil, err
	}
	if err := onnx.ReplaceDir(tmp, dest); err != nil {
		return nil, err
	}
	ok = true
	return m, nil
}
