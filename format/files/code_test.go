package files

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCodeOwnTree reads anna's own source: each Go function and method is
// a part named by its symbol ("Engine.Add"), with its doc comment, at the
// lines it has in the file; Python functions likewise.
func TestCodeOwnTree(t *testing.T) {
	src, err := os.ReadFile("../../engine/write.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	d, err := readPath(t, "../../engine/write.go")
	if err != nil {
		t.Fatal(err)
	}
	var add *Part
	for i := range d.Parts {
		p := &d.Parts[i]
		if p.Code != "go" {
			t.Fatalf("part %d: code %q", i, p.Code)
		}
		// Every part's text is the file's lines it names.
		if got := strings.Join(lines[p.StartLine-1:p.EndLine], "\n"); got != p.Text {
			t.Fatalf("part %d (lines %d-%d) is not those lines:\n%q\n%q", i, p.StartLine, p.EndLine, p.Text, got)
		}
		for _, s := range strings.Split(p.Symbol, ", ") {
			if s == "Engine.Add" {
				add = p
			}
		}
	}
	if add == nil {
		t.Fatalf("no part for Engine.Add:\n%s", dump(d))
	}
	decl := regexp.MustCompile(`(?m)^func \(e \*Engine\) Add\(`).FindStringIndex(string(src))
	declLine := strings.Count(string(src[:decl[0]]), "\n") + 1
	if add.StartLine > declLine || add.EndLine <= declLine || !strings.Contains(add.Text, "// Add upserts") ||
		strings.HasPrefix(CodeParser(), "tree-sitter") && !strings.HasPrefix(add.Text, "// Add upserts") {
		t.Errorf("Engine.Add: lines %d-%d (declared on %d), text %.60q", add.StartLine, add.EndLine, declLine, add.Text)
	}
	if CodeParser() != "" && strings.HasPrefix(CodeParser(), "tree-sitter") {
		py, err := readPath(t, "../../tools/decoder_ref_common.py")
		if err != nil {
			t.Fatal(err)
		}
		named := 0
		for _, p := range py.Parts {
			if p.Symbol != "" {
				named++
			}
		}
		if named == 0 {
			t.Errorf("no Python definition found:\n%s", dump(py))
		}
	}
}

func readPath(t *testing.T, p string) (Doc, error) {
	t.Helper()
	f, ok := Lookup(p)
	if !ok {
		t.Fatalf("no format for %s", p)
	}
	return f.Read(context.Background(), p, filepath.Base(p), Limits{})
}

// TestCodeLanguages: each language tree-sitter parses (or the patterns of
// the blank-line fallback) names its definitions.
func TestCodeLanguages(t *testing.T) {
	cases := map[string]struct{ src, symbol string }{
		"a.py":   {"import os\n\n\nclass Lamp:\n    \"\"\"A lamp.\"\"\"\n\n    def trim(self):\n        return 1\n\n\n@cache\ndef wick(n):\n    return n\n", "wick"},
		"a.js":   {"const x = 1;\n\n// Trims.\nfunction trimWick(n) {\n  return n;\n}\n\nexport const light = () => 2;\n", "trimWick"},
		"a.ts":   {"interface Lamp { wick: number }\n\nexport function trimWick(l: Lamp): number {\n  return l.wick;\n}\n", "trimWick"},
		"a.tsx":  {"export function Panel(props: {n: number}) {\n  return <div>{props.n}</div>;\n}\n", "Panel"},
		"a.rs":   {"use std::fmt;\n\n/// A lamp.\npub struct Lamp { wick: u32 }\n\nimpl Lamp {\n    pub fn trim(&mut self) { self.wick -= 1; }\n}\n\nfn main() {}\n", "Lamp"},
		"A.java": {"package a;\n\n/** A lamp. */\npublic class Lamp {\n  private int wick;\n  public int trimWick() { return wick; }\n}\n", "Lamp"},
		"a.c":    {"#include <stdio.h>\n\n/* Trims. */\nstatic int trim_wick(int n) {\n  return n - 1;\n}\n\nstruct lamp { int wick; };\n", "trim_wick"},
		"a.cpp":  {"#include <vector>\n\nnamespace light {\nclass Lamp {\n public:\n  int trimWick() { return 1; }\n};\n}  // namespace light\n", "light"},
		"a.rb":   {"class Lamp\n  def trim_wick\n    1\n  end\nend\n", "Lamp"},
	}
	for name, c := range cases {
		f, _ := Lookup(name)
		d, err := f.ReadBytes(context.Background(), []byte(c.src), name, Limits{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		found := false
		for _, p := range d.Parts {
			for _, s := range strings.Split(p.Symbol, ", ") {
				found = found || s == c.symbol || strings.HasPrefix(s, c.symbol+".")
			}
		}
		if !found {
			t.Errorf("%s: no part named %q (%s):\n%s", name, c.symbol, CodeParser(), dump(d))
		}
	}
}
