package files

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/anna-search/anna/internal/safe"
)

// fuzzRead reads data as a file named name and checks what every reader
// promises: no panic, an error that names the file and a reason, or parts
// of valid UTF-8 text within the limits.
func fuzzRead(t *testing.T, name string, data []byte) {
	f, ok := Lookup(name)
	if !ok {
		t.Fatalf("no format for %s", name)
	}
	lim := Limits{MaxText: 1 << 16, MaxUnpacked: 1 << 20}
	d, err := f.ReadBytes(context.Background(), data, name, lim)
	var pe *safe.PanicError
	if errors.As(err, &pe) {
		t.Fatalf("%s: the reader panicked: %v\n%s", name, pe.Value, pe.Stack)
	}
	if err != nil {
		if !strings.HasPrefix(err.Error(), name+": ") || Reason(err) == "" {
			t.Fatalf("%s: error %q names no file or reason", name, err)
		}
		return
	}
	total := 0
	for i, p := range d.Parts {
		if strings.TrimSpace(p.Text) == "" || !utf8.ValidString(p.Text) {
			t.Fatalf("%s: part %d: %q", name, i, p.Text)
		}
		if p.StartLine > p.EndLine {
			t.Fatalf("%s: part %d: lines %d-%d", name, i, p.StartLine, p.EndLine)
		}
		total += len(p.Text)
	}
	if total > 2*lim.MaxText+len(d.Parts)*8 {
		t.Fatalf("%s: %d bytes of text, past the limit of %d", name, total, lim.MaxText)
	}
}

// seed adds the fixtures whose names end in one of exts.
func seed(f *testing.F, exts ...string) {
	ms, _ := filepath.Glob("testdata/*")
	for _, m := range ms {
		for _, e := range exts {
			if strings.HasSuffix(m, e) {
				if b, err := os.ReadFile(m); err == nil {
					f.Add(b)
				}
			}
		}
	}
}

func FuzzPDF(f *testing.F) {
	seed(f, ".pdf")
	f.Fuzz(func(t *testing.T, b []byte) { fuzzRead(t, "f.pdf", b) })
}

func FuzzHTML(f *testing.F) {
	seed(f, ".html")
	f.Add([]byte("<html><body><nav>menu</nav><h1>T</h1><p>text<table><tr><td>a<td>b</table><pre>x\n y</pre>"))
	f.Fuzz(func(t *testing.T, b []byte) { fuzzRead(t, "f.html", b) })
}

// FuzzOffice reads the input as each zip + XML format in turn.
func FuzzOffice(f *testing.F) {
	seed(f, ".docx", ".pptx", ".xlsx", ".odt", ".epub")
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, n := range []string{"f.docx", "f.pptx", "f.xlsx", "f.odt", "f.epub"} {
			fuzzRead(t, n, b)
		}
	})
}

func FuzzNotebook(f *testing.F) {
	seed(f, ".ipynb")
	f.Add([]byte(`{"worksheets":[{"cells":[{"cell_type":"code","input":"print(1)"}]}],"metadata":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) { fuzzRead(t, "f.ipynb", b) })
}

// FuzzMail reads the input as a message and as a mailbox.
func FuzzMail(f *testing.F) {
	seed(f, ".eml", ".mbox")
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzRead(t, "f.eml", b)
		fuzzRead(t, "f.mbox", b)
	})
}

// FuzzText reads the input as Markdown, reStructuredText and plain text.
func FuzzText(f *testing.F) {
	seed(f, ".md", ".rst", ".txt")
	f.Add([]byte("Title\n=====\n\nSub\n---\n\ntext\n"))
	f.Add([]byte("\xff\xfeh\x00i\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, n := range []string{"f.md", "f.rst", "f.txt"} {
			fuzzRead(t, n, b)
		}
	})
}

// FuzzCode reads the input as Go, Python, TypeScript, C++ and Ruby (the
// last through the blank-line fallback).
func FuzzCode(f *testing.F) {
	for _, p := range []string{"../../engine/location.go", "../../tools/decoder_ref_common.py"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("class A {\n public:\n  int f() { return 1; }\n};\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, n := range []string{"f.go", "f.py", "f.ts", "f.cpp", "f.rb"} {
			fuzzRead(t, n, b)
		}
	})
}
