package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// updateCLIReference rewrites docs/cli-reference.md from the commands:
// go test ./cmd/annactl -run TestCLIReference -update
var updateCLIReference = flag.Bool("update", false, "rewrite docs/cli-reference.md from the commands")

// cliReferenceFile is the generated reference, relative to this package.
const cliReferenceFile = "../../docs/cli-reference.md"

// cliReferenceFix is the command that regenerates the reference.
const cliReferenceFix = "go test ./cmd/annactl -run TestCLIReference -update"

// cliReferenceHeader opens the generated file.
const cliReferenceHeader = `# annactl command reference

Generated from the commands themselves by spf13/cobra/doc: do not edit by hand. After changing a command or a
flag, run ` + "`" + cliReferenceFix + "`" + ` (without -update, TestCLIReference fails
while this page differs from what the commands say). [docs/cli.md](cli.md) groups the commands and says what they
are for.

`

// cliMachineDefaults are the flags whose default is computed from the
// machine annactl runs on ("COMMAND PATH --flag"), and the rule the reference
// shows instead of this machine's value.
var cliMachineDefaults = map[string]string{
	"annactl mine-negatives --workers": "GOMAXPROCS",
}

// cliReference renders the reference: the header, then one "## " section
// per available command, depth first in name order (root first). The
// output depends only on the commands' definitions: the auto-generated date
// footer is off, and links point at the sections of the same file.
func cliReference(t *testing.T) []byte {
	t.Helper()
	// Defaults under the anna home read as $ANNA_HOME/..., not as this
	// machine's path.
	t.Setenv("ANNA_HOME", "$ANNA_HOME")
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	root := a.rootCommand()
	root.DisableAutoGenTag = true
	root.InitDefaultHelpCmd()
	root.InitDefaultVersionFlag()
	root.InitDefaultCompletionCmd()
	for key, rule := range cliMachineDefaults {
		path, name, _ := strings.Cut(key, " --")
		c, _, err := root.Find(strings.Fields(path)[1:])
		if err != nil || c.CommandPath() != path || c.Flags().Lookup(name) == nil {
			t.Fatalf("cliMachineDefaults: %s is no longer a flag; remove it", key)
		}
		c.Flags().Lookup(name).DefValue = rule
	}
	link := func(name string) string { // "annactl_models_install.md" -> "#annactl-models-install"
		return "#" + strings.ReplaceAll(strings.TrimSuffix(name, ".md"), "_", "-")
	}
	var buf bytes.Buffer
	buf.WriteString(cliReferenceHeader)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.DisableAutoGenTag = true
		if err := doc.GenMarkdownCustom(c, &buf, link); err != nil {
			t.Fatalf("%s: %v", c.CommandPath(), err)
		}
		for _, child := range c.Commands() { // sorted by name
			if child.IsAvailableCommand() && !child.IsAdditionalHelpTopicCommand() {
				walk(child)
			}
		}
	}
	walk(root)
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// referenceSection is one command's "## " section of the reference.
type referenceSection struct {
	command string // "annactl models install"; "" for the header
	line    int    // 1-based line of the heading in its file
	text    string
}

// referenceSections splits a reference into its header and one section per
// command.
func referenceSections(s string) []referenceSection {
	var out []referenceSection
	cur := referenceSection{line: 1}
	var body []string
	for i, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "## ") {
			cur.text = strings.Join(body, "\n")
			out = append(out, cur)
			cur, body = referenceSection{command: strings.TrimPrefix(l, "## "), line: i + 1}, nil
		}
		body = append(body, l)
	}
	cur.text = strings.Join(body, "\n")
	return append(out, cur)
}

// firstDifference names the first line where have (starting at line
// first of docs/cli-reference.md) and want differ.
func firstDifference(have, want string, first int) string {
	h, w := strings.Split(have, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(h), len(w)); i++ {
		var hl, wl string
		if i < len(h) {
			hl = h[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if hl != wl {
			return fmt.Sprintf("at docs/cli-reference.md:%d:\n  the file says:    %q\n  the command says: %q", first+i, hl, wl)
		}
	}
	return "same text"
}

// cliReferenceDrift explains how the committed reference (have) differs
// from the commands (want), command by command; "" when they are the same.
func cliReferenceDrift(have, want string) string {
	if have == want {
		return ""
	}
	hs, ws := referenceSections(have), referenceSections(want)
	byName := map[string]referenceSection{}
	for _, s := range hs {
		byName[s.command] = s
	}
	wanted := map[string]bool{}
	var msgs []string
	for _, w := range ws {
		wanted[w.command] = true
		h, ok := byName[w.command]
		switch {
		case !ok:
			msgs = append(msgs, fmt.Sprintf("%q is missing from docs/cli-reference.md", w.command))
		case h.text != w.text && w.command == "":
			msgs = append(msgs, "the header differs "+firstDifference(h.text, w.text, h.line))
		case h.text != w.text:
			msgs = append(msgs, fmt.Sprintf("%q differs from the command's help %s", w.command, firstDifference(h.text, w.text, h.line)))
		}
	}
	for _, h := range hs {
		if !wanted[h.command] {
			msgs = append(msgs, fmt.Sprintf("%q (docs/cli-reference.md:%d) is no longer a command", h.command, h.line))
		}
	}
	if len(msgs) == 0 { // same sections in another order
		msgs = append(msgs, "the commands are in another order")
	}
	return strings.Join(msgs, "\n")
}

// TestCLIReference checks that docs/cli-reference.md is what cobra/doc
// generates from the commands now; with -update it rewrites the file.
func TestCLIReference(t *testing.T) {
	want := string(cliReference(t)) + "\n"
	if *updateCLIReference {
		if err := os.WriteFile(cliReferenceFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", filepath.Clean(cliReferenceFile))
		return
	}
	have, err := os.ReadFile(cliReferenceFile)
	if err != nil {
		t.Fatalf("%v: generate it with `%s`", err, cliReferenceFix)
	}
	if drift := cliReferenceDrift(string(have), want); drift != "" {
		t.Fatalf("docs/cli-reference.md is not what the commands say now:\n%s\nrun `%s` and commit the result",
			drift, cliReferenceFix)
	}
}

// TestCLIReferenceDrift checks that a changed flag's help is reported by
// the command that owns it.
func TestCLIReferenceDrift(t *testing.T) {
	want := string(cliReference(t)) + "\n"
	if d := cliReferenceDrift(want, want); d != "" {
		t.Fatalf("identical references differ: %s", d)
	}
	const old = "## annactl search\n"
	i := strings.Index(want, old)
	if i < 0 {
		t.Fatal("no annactl search section")
	}
	j := strings.Index(want[i:], "--index")
	if j < 0 {
		t.Fatal("annactl search has no --index flag in the reference")
	}
	have := want[:i+j] + "--indexx" + want[i+j+len("--index"):]
	d := cliReferenceDrift(have, want)
	if !strings.Contains(d, `"annactl search"`) || !strings.Contains(d, "--indexx") {
		t.Fatalf("drift does not name annactl search's changed line:\n%s", d)
	}
	if d := cliReferenceDrift(strings.Replace(want, "## annactl stats\n", "## annactl statz\n", 1), want); !strings.Contains(d, `"annactl stats" is missing`) || !strings.Contains(d, `"annactl statz"`) {
		t.Fatalf("a renamed section is not reported:\n%s", d)
	}
}
