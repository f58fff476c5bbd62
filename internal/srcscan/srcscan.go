// Package srcscan walks the module's Go source for the tests that hold a
// rule over all of it (internal/safe's nil-context guard, hint's "no
// library string names annactl"): every non-test Go file, parsed.
package srcscan

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
)

// Files parses every Go file under root that is not a test and calls fn
// with its path relative to root ("/"-separated) and its syntax. Folders
// whose name starts with "." or "_", testdata, and those skip reports
// (given their relative path and name) are not entered.
func Files(root string, skip func(rel, name string) bool, fn func(rel string, fset *token.FileSet, f *ast.File) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || skip(rel, name)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		return fn(rel, fset, f)
	})
}
