package safe

import (
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/srcscan"
)

// Every exported function or method of the module's importable packages
// (the API: not under an internal/ folder) that takes a named
// context.Context starts by making a nil one context.Background() (ctx =
// safe.Ctx(ctx), or the same written out), so a caller's nil context never
// reaches a ctx.Err() or ctx.Done(). The guard is at the public boundary:
// internal packages, commands (package main), tools, benchmarks and tests
// are not checked.
func TestLibraryGuardsNilContext(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skipf("module root not found: %v", err)
	}
	skipDirs := map[string]bool{"cmd": true, "tools": true, "benchmarks": true, "scripts": true, "testdata": true, "internal": true}
	checked := 0
	err := srcscan.Files(root, func(_, name string) bool { return skipDirs[name] }, func(_ string, fset *token.FileSet, f *ast.File) error {
		if f.Name.Name == "main" {
			return nil
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() || fd.Body == nil {
				continue
			}
			for _, field := range fd.Type.Params.List {
				if !isContext(field.Type) {
					continue
				}
				for _, name := range field.Names {
					if name.Name == "_" {
						continue
					}
					checked++
					if !guarded(fd.Body.List, name.Name) {
						t.Errorf("%s: %s does not start with %s = safe.Ctx(%[3]s): a nil context would reach it", fset.Position(fd.Pos()), fd.Name.Name, name.Name)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d functions checked: is %s the module root?", checked, root)
	}
}

func isContext(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "context" && sel.Sel.Name == "Context"
}

// guarded reports whether one of the first two statements is
// name = safe.Ctx(name) or if name == nil { name = ... }.
func guarded(body []ast.Stmt, name string) bool {
	for _, st := range body[:min(2, len(body))] {
		switch s := st.(type) {
		case *ast.AssignStmt:
			if len(s.Lhs) != 1 || len(s.Rhs) != 1 || !isIdent(s.Lhs[0], name) {
				continue
			}
			if c, ok := s.Rhs[0].(*ast.CallExpr); ok && len(c.Args) == 1 && isIdent(c.Args[0], name) {
				if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Ctx" {
					return true
				}
			}
		case *ast.IfStmt:
			if b, ok := s.Cond.(*ast.BinaryExpr); ok && b.Op == token.EQL && isIdent(b.X, name) && isIdent(b.Y, "nil") {
				return true
			}
		}
	}
	return false
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
