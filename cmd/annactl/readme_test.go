package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// readmeCommand is one `annactl ...` line of a sh block of README.md or of
// a guide in docs/.
type readmeCommand struct {
	file  string // relative to the repository root
	line  int
	args  []string // after "annactl"
	text  string
	block int // which sh block of its file (0-based)
	tour  bool
}

// where is the command's file and line, for messages.
func (c readmeCommand) where() string { return fmt.Sprintf("%s:%d", c.file, c.line) }

// readmeCommands extracts every annactl command line from the ```sh blocks
// of README.md, split into words as a POSIX shell would (quotes,
// comments). The tour is the first block of the "## The command line"
// section.
func readmeCommands(t *testing.T) []readmeCommand {
	t.Helper()
	cmds, tourBlock := shCommands(t, "README.md", "The command line")
	if tourBlock < 0 {
		t.Fatal(`README.md has no sh block in "## The command line"`)
	}
	return cmds
}

// guideCommands extracts the annactl command lines of the guides, the
// Markdown files directly in docs/ (docs/results/ records what was run and
// is not checked), as readmeCommands does. It fails when the guides hold
// none, so that moving the guides away cannot silently stop the check.
func guideCommands(t *testing.T) []readmeCommand {
	t.Helper()
	guides, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []readmeCommand
	for _, g := range guides {
		cmds, _ := shCommands(t, filepath.ToSlash(strings.TrimPrefix(g, "../../")), "")
		out = append(out, cmds...)
	}
	if len(out) == 0 {
		t.Fatal("no annactl command in the sh blocks of docs/*.md")
	}
	return out
}

// shCommands extracts the annactl command lines of the ```sh blocks of
// file (relative to the repository root). tourSection names the "## "
// section whose first sh block is the tour ("" for none); tourBlock is that
// block's index, -1 when there is none.
func shCommands(t *testing.T, file, tourSection string) (out []readmeCommand, tourBlock int) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("../..", file))
	if err != nil {
		t.Fatal(err)
	}
	inBlock, block, section := false, -1, ""
	tourBlock = -1
	parser := syntax.NewParser()
	for i, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		case strings.HasPrefix(line, "```sh"):
			inBlock = true
			block++
			if tourSection != "" && section == tourSection && tourBlock < 0 {
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
			t.Fatalf("%s:%d: not one shell command: %q (%v)", file, i+1, text, err)
		}
		call, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
		if !ok {
			t.Fatalf("%s:%d: not a simple command: %q", file, i+1, text)
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
								t.Fatalf("%s:%d: expansion inside quotes in %q", file, i+1, text)
							}
						}
					case *syntax.Lit:
						lit += q.Value
					default:
						t.Fatalf("%s:%d: a word with an expansion in %q: write it out", file, i+1, text)
					}
				}
			}
			words = append(words, lit)
		}
		out = append(out, readmeCommand{file: file, line: i + 1, args: words[1:], text: text, block: block, tour: tourBlock >= 0 && block == tourBlock})
	}
	return out, tourBlock
}

// TestReadmeCommands checks every annactl command in README.md and in the
// guides (docs/*.md): each one parses (its command exists, its flags exist
// and take the values given, its arguments are of the right number), and
// the tour — the first block of README's "The command line" — runs, in
// order, in a scratch directory where testdata/ is this repository's, each
// command exiting 0.
func TestReadmeCommands(t *testing.T) {
	cmds := readmeCommands(t)
	if len(cmds) < 10 {
		t.Fatalf("only %d annactl commands found in README.md", len(cmds))
	}
	for _, c := range append(append([]readmeCommand(nil), cmds...), guideCommands(t)...) {
		root := (&app{}).rootCommand()
		sub, rest, err := root.Find(c.args)
		if err != nil {
			t.Errorf("%s: %q: %v", c.where(), c.text, err)
			continue
		}
		if err := sub.ParseFlags(rest); err != nil {
			t.Errorf("%s: %q: %v", c.where(), c.text, err)
			continue
		}
		if err := sub.ValidateArgs(sub.Flags().Args()); err != nil {
			t.Errorf("%s: %q: %v", c.where(), c.text, err)
		}
	}
	if t.Failed() {
		return
	}
	needModel(t)
	if testing.Short() {
		t.Skip("the tour trains and re-indexes (about 20 s)")
	}
	ownHome(t) // reindex keeps the model it trains under $ANNA_HOME/models: not the real one
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
			t.Fatalf("%s: %s\n%s", c.where(), c.text, r)
		}
		t.Logf("%s: %s: ok", c.where(), c.text)
	}
	if n == 0 {
		t.Fatal("the tour block has no commands")
	}
}
