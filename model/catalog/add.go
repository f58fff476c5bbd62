package catalog

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/model"
	"github.com/anna-search/anna/model/onnx"
)

// Add installs a model directory made here — `annactl train`'s DIR/model,
// `annactl models import`'s DEST — as modelsDir/name, so that commands
// find it by name and `annactl models list` shows it. The directory's
// manifest must load and every file it lists must match its sha256 before
// anything is written; the copy is made under name.partial, checked
// again, and renamed over what was there (onnx.ReplaceDir). The manifest's
// name becomes name; the fingerprint, which does not depend on it, is
// kept.
func Add(ctx context.Context, src, modelsDir, name string) (*model.Manifest, error) {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return nil, fmt.Errorf("catalog: model name %q: want one path element", name)
	}
	m, err := checkFiles(src)
	if err != nil {
		return nil, err
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
		return copyFile(path, out)
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: copying %s: %w", src, err)
	}
	m.Name = name
	if err := model.WriteManifest(tmp, m); err != nil {
		return nil, err
	}
	if _, err := checkFiles(tmp); err != nil {
		return nil, err
	}
	if err := onnx.ReplaceDir(tmp, dest); err != nil {
		return nil, err
	}
	ok = true
	return m, nil
}

// checkFiles loads dir's manifest and checks the files it lists.
func checkFiles(dir string) (*model.Manifest, error) {
	m, err := model.LoadManifest(dir)
	if err != nil {
		return nil, err
	}
	if len(m.Files) == 0 {
		return nil, fmt.Errorf("catalog: %s: the manifest lists no files", dir)
	}
	for f, want := range m.Files {
		got, err := fileSHA256(filepath.Join(dir, f))
		if err != nil {
			return nil, fmt.Errorf("catalog: %s: %w", dir, err)
		}
		if got != want {
			return nil, fmt.Errorf("catalog: %s: sha256 %s, the manifest says %s (the directory changed after it was written)", filepath.Join(dir, f), got, want)
		}
	}
	return m, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
