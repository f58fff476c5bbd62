package hint_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/srcscan"
)

// TestOf: the actions are found through %w and errors.Join, the outermost
// carrier's first; the text is the wrapped error's.
func TestOf(t *testing.T) {
	base := errors.New("base")
	act := hint.Action{Kind: hint.InstallModel, Model: "bge-small-en-v1.5"}
	err := fmt.Errorf("outer: %w", hint.Errorf(act, "model: %w", base))
	if hs := hint.Of(err); len(hs) != 1 || hs[0] != act {
		t.Fatalf("Of = %+v", hs)
	}
	if !errors.Is(err, base) || err.Error() != "outer: model: base" {
		t.Fatalf("wrapping lost: %v", err)
	}
	var he *hint.Error
	if !errors.As(err, &he) || he.Actions[0] != act {
		t.Fatalf("errors.As *hint.Error: %v", err)
	}
	outer := hint.Action{Kind: hint.Repair, Index: "idx"}
	if hs := hint.Of(hint.Wrap(err, outer)); len(hs) != 1 || hs[0] != outer {
		t.Fatalf("the outer carrier's actions: %+v", hs)
	}
	if hs := hint.Of(errors.Join(base, err)); len(hs) != 1 || hs[0] != act {
		t.Fatalf("through errors.Join: %+v", hs)
	}
	if hint.Of(base) != nil || hint.Of(nil) != nil || hint.Wrap(nil, act) != nil {
		t.Fatal("an error without actions has some")
	}
	if s := act.String(); s != "install the catalogue's model bge-small-en-v1.5" {
		t.Fatalf("String = %q", s)
	}
}

// TestNoLibraryStringNamesTheCLI: no string literal of the library (every
// non-test Go file outside cmd/, the programs) names annactl. A library
// error says what to do in words and carries a hint (this package), which
// annactl renders as its command and the server in its JSON error: a Go
// program's user has no annactl to run.
func TestNoLibraryStringNamesTheCLI(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	cli := regexp.MustCompile(`\bannactl\b`)
	// A flag in an error's text: "--name" after a space, a bracket or at
	// the start. internal/setup's errors are anna-env's, whose flags they
	// name.
	flag := regexp.MustCompile(`(^"|[\s(])--[a-z]`)
	var bad []string
	files := 0
	err = srcscan.Files(root, func(rel, _ string) bool { return rel == "cmd" }, func(rel string, fset *token.FileSet, f *ast.File) error {
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && cli.MatchString(lit.Value) {
				p := fset.Position(lit.Pos())
				bad = append(bad, fmt.Sprintf("%s:%d: %.100s", rel, p.Line, lit.Value))
			}
			if call, ok := n.(*ast.CallExpr); ok && isErrorConstructor(call.Fun) && !strings.HasPrefix(rel, "internal/setup/") {
				for _, arg := range call.Args { // the format (hint.Errorf's second)
					if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING && flag.MatchString(lit.Value) {
						p := fset.Position(lit.Pos())
						bad = append(bad, fmt.Sprintf("%s:%d: an error naming a flag: %.100s", rel, p.Line, lit.Value))
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 200 {
		t.Fatalf("scanned %d files: not the module", files)
	}
	for _, b := range bad {
		t.Errorf("a library string names the command line (say it in words and attach a hint.Action): %s", b)
	}
}

// isErrorConstructor says whether fun makes an error from a format or a
// message: fmt.Errorf, errors.New, hint.Errorf, and the packages' own
// errorf and badRequest.
func isErrorConstructor(fun ast.Expr) bool {
	switch f := fun.(type) {
	case *ast.SelectorExpr:
		return f.Sel.Name == "Errorf" || f.Sel.Name == "New" && isIdent(f.X, "errors")
	case *ast.Ident:
		return f.Name == "errorf" || f.Name == "badRequest"
	}
	return false
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
