package files

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readFixture reads testdata/name with the registry's reader.
func readFixture(t *testing.T, name string) (Doc, error) {
	t.Helper()
	f, ok := Lookup(name)
	if !ok {
		t.Fatalf("no format for %s", name)
	}
	return f.Read(context.Background(), filepath.Join("testdata", name), name, Limits{})
}

// partWith is the first part holding s, or nil.
func partWith(d Doc, s string) *Part {
	for i := range d.Parts {
		if strings.Contains(d.Parts[i].Text, s) {
			return &d.Parts[i]
		}
	}
	return nil
}

func dump(d Doc) string {
	var b strings.Builder
	fmt.Fprintf(&b, "title %q author %q date %q lang %q, %d parts\n", d.Title, d.Author, d.Date, d.Lang, len(d.Parts))
	for i, p := range d.Parts {
		fmt.Fprintf(&b, "  %d: page %d lines %d-%d section %q symbol %q title %q: %.80q\n", i, p.Page, p.StartLine, p.EndLine, p.Section, p.Symbol, p.Title, p.Text)
	}
	return b.String()
}

// TestFixtures reads the files real producers made (testdata/make.sh):
// the format's own title, the text, and where each passage lies.
func TestFixtures(t *testing.T) {
	type want struct {
		title, author, text, section string
		page                         int
	}
	cases := map[string]want{
		"handbook.md":              {title: "The Lighthouse Keeper's Handbook", author: "Mara Ellison", text: "brass wick scissors", section: "The Lighthouse Keeper's Handbook › Trimming the Wick"},
		"handbook.docx":            {title: "The Lighthouse Keeper’s Handbook", author: "Mara Ellison", text: "brass wick scissors", section: "Trimming the Wick"},
		"handbook.odt":             {title: "The Lighthouse Keeper’s Handbook", author: "Mara Ellison", text: "brass wick scissors", section: "Trimming the Wick"},
		"handbook.epub":            {title: "The Lighthouse Keeper’s Handbook", author: "Mara Ellison", text: "brass wick scissors", section: "Trimming the Wick"},
		"handbook.pptx":            {title: "The Lighthouse Keeper’s Handbook", author: "Mara Ellison", text: "brass wick scissors", section: "Slide 2"},
		"handbook.ipynb":           {text: "brass wick scissors", section: "Trimming the Wick"},
		"handbook-libreoffice.pdf": {title: "The Lighthouse Keeper’s Handbook", text: "laid in for forty days", page: 2},
		"report-ghostscript.pdf":   {title: "", text: "hyperradiant lens ordered from Paris", page: 2},
		"keepers.xlsx":             {text: "Fastnet\tWilliam Douglass", section: "keepers (rows 1-5)"},
		"site.html":                {title: "Storm Glass Forecasting", author: "Ines Kerr", text: "camphor in forty millilitres", section: "Making your own"},
		"message.eml":              {title: "Relief boat delayed by the swell", author: "Superintendent Ross <ross@example.org>", text: "swell at the landing stage"},
		"archive.mbox":             {text: "mercury bath", section: "message 1"},
	}
	for name, w := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := readFixture(t, name)
			if err != nil {
				t.Fatal(err)
			}
			if w.title != "" && d.Title != w.title {
				t.Errorf("title %q, want %q", d.Title, w.title)
			}
			if w.author != "" && d.Author != w.author {
				t.Errorf("author %q, want %q", d.Author, w.author)
			}
			p := partWith(d, w.text)
			if p == nil {
				t.Fatalf("no part holds %q:\n%s", w.text, dump(d))
			}
			if w.section != "" && !strings.Contains(p.Section, w.section) {
				t.Errorf("section %q, want %q:\n%s", p.Section, w.section, dump(d))
			}
			if p.Page != w.page {
				t.Errorf("page %d, want %d:\n%s", p.Page, w.page, dump(d))
			}
			if testing.Verbose() {
				t.Log(dump(d))
			}
		})
	}
}

// TestNotRead: each file that cannot be read says why.
func TestNotRead(t *testing.T) {
	for name, want := range map[string]error{
		"scanned.pdf":   ErrNoTextLayer,
		"encrypted.pdf": ErrEncrypted,
	} {
		_, err := readFixture(t, name)
		if !errors.Is(err, want) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want %v naming the file", name, err, want)
		}
	}
	_ = os.Remove
}

// TestPDFWordsApart: groff and Ghostscript place each word by position with
// no space between, and PDFium ran them together ("twelvepounds a
// year,and"); the reader puts a space where the characters' boxes are a
// word's gap apart.
func TestPDFWordsApart(t *testing.T) {
	d, err := readFixture(t, "report-ghostscript.pdf")
	if err != nil {
		t.Fatal(err)
	}
	if p := partWith(d, "an increase of twelve pounds a year, and assistant keepers"); p == nil || p.Page != 1 {
		t.Fatalf("page 1 does not read \"an increase of twelve pounds a year, and assistant keepers\":\n%s", dump(d))
	}
}

// TestEightBitSubject: a subject sent as raw Latin-1 bytes (no RFC 2047
// words, as old mailers did) reads as its letters, not as bytes that are not
// UTF-8 (FuzzMail found "Subject:\xff" giving such a part).
func TestEightBitSubject(t *testing.T) {
	f, _ := Lookup("m.eml")
	d, err := f.ReadBytes(context.Background(), []byte("Subject: Caf\xe9 cr\xe8me\r\n\r\nbody text\r\n"), "m.eml", Limits{})
	if err != nil || d.Title != "Café crème" {
		t.Fatalf("title %q, err %v; want Café crème", d.Title, err)
	}
}
