package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// readmeCommand is one `annactl ...` line of a sh block of README.md.
type readmeCommand struct {
	line  int
	args  []string // after "annactl"
	text  string
	block int // which sh block (0-based)
	tour  bool
}

// readmeCommands extracts every annactl command line from the ```sh blocks
// of README.md, split into words as a POSIX shell would (quotes,
// comments). The tour is the first block of the "## The command line"
// section.
func readmeCommands(t *testing.T) []readmeCommand {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []readmeCommand
	inBlock, block, tourBlock, section := false, -1, -1, ""
	parser := syntax.NewParser()
	for i, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		case strings.HasPrefix(line, "```sh"):
			inBlock = true
			block++
			if section == "The command line" && tourBlock < 0 {
				tourBlock = block
			}
			continue
		case strings.HasPrefix(line, "```"):
			inBlock = false
		}
		if !inBlock {
			continue
		}
		text := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "$ "))
		if !strings.HasPrefix(text, "annactl ") {
			continue
		}
		f, err := parser.Parse(strings.NewReader(text), "")
		if err != nil || len(f.Stmts) != 1 {
			t.Fatalf("README.md:%d: not one shell command: %q (%v)", i+1, text, err)
		}
		call, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
		if !ok {
			t.Fatalf("README.md:%d: not a simple command: %q", i+1, text)
		}
		var words []string
		for _, w := range call.Args {
			lit := w.Lit()
			if lit == "" {
				// Quoted words: join the parts' literal values.
				for _, p := range w.Parts {
					switch q := p.(type) {
					case *syntax.SglQuoted:
						lit += q.Value
					case *syntax.DblQuoted:
						for _, qp := range q.Parts {
							if l, ok := qp.(*syntax.Lit); ok {
								lit += l.Value
							} else {
								t.Fatalf("README.md:%d: expansion inside quotes in %q", i+1, text)
							}
						}
					case *syntax.Lit:
						lit += q.Value
					default:
						t.Fatalf("README.md:%d: a word with an expansion in %q: write it out", i+1, text)
					}
				}
			}
			words = append(words, lit)
		}
		out = append(out, readmeCommand{line: i + 1, args: words[1:], text: text, block: block, tour: block == tourBlock})
	}
	if tourBlock < 0 {
		t.Fatal(`README.md has no sh block in "## The command line"`)
	}
	return out
}

// TestReadmeCommands checks every annactl command in README.md: each one
// parses (its command exists, its flags exist and take the values given, its
// arguments are of the right number), and the tour — the first block of
// "The command line" — runs, in order, in a scratch directory where
// testdata/ is this repository's, each command exiting 0.
func TestReadmeCommands(t *testing.T) {
	cmds := readmeCommands(t)
	if len(cmds) < 10 {
		t.Fatalf("only %d annactl commands found in README.md", len(cmds))
	}
	for _, c := range cmds {
		root := (&app{}).rootCommand()
		sub, rest, err := root.Find(c.args)
		if err != nil {
			t.Errorf("README.md:%d: %q: %v", c.line, c.text, err)
			continue
		}
		if err := sub.ParseFlags(rest); err != nil {
			t.Errorf("README.md:%d: %q: %v", c.line, c.text, err)
			continue
		}
		if err := sub.ValidateArgs(sub.Flags().Args()); err != nil {
			t.Errorf("README.md:%d: %q: %v", c.line, c.text, err)
		}
	}
	if t.Failed() {
		return
	}
	needModel(t)
	if testing.Short() {
		t.Skip("the tour trains and re-indexes (about 20 s)")
	}
	dir := t.TempDir()
	abs, _ := filepath.Abs("../../testdata")
	if err := os.Symlink(abs, filepath.Join(dir, "testdata")); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	n := 0
	for _, c := range cmds {
		if !c.tour {
			continue
		}
		n++
		r := annactl(t, "", c.args...)
		if r.code != 0 {
			t.Fatalf("README.md:%d: %s\n%s", c.line, c.text, r)
		}
		t.Logf("README.md:%d: %s: ok", c.line, c.text)
	}
	if n == 0 {
		t.Fatal("the tour block has no commands")
	}
}
