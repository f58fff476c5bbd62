package ingest_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/home"
)

// chromiumPDF prints html to a PDF with headless Chromium (what `make
// test` installs, scripts/chromium.sh); false when Chromium is missing.
func chromiumPDF(t *testing.T, html, pdf string) bool {
	t.Helper()
	var bin string
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Log("chromium not installed (make chromium, or scripts/chromium.sh): its PDF is left out")
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir="+t.TempDir(), "--no-pdf-header-footer", "--print-to-pdf="+pdf, "file://"+html).CombinedOutput()
	if _, serr := os.Stat(pdf); err != nil || serr != nil {
		t.Fatalf("chromium --print-to-pdf: %v %v\n%s", err, serr, out)
	}
	return true
}

// atlas is a web page of three chapters, each printed on a page of its own.
const atlas = `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>An Atlas of Harbour Lights</title>
<style>h2 { break-before: page; } body { font: 12pt serif; }</style></head><body>
<h1>An Atlas of Harbour Lights</h1>
<p>This atlas describes the harbour lights of the northern coast, their characters and their keepers. Each light is
identified at night by its colour and the rhythm of its flashes, which pilots learn by heart before they take a ship
into harbour.</p>
<h2>Red sector lights</h2>
<p>A sector light shows red over the dangerous water on either side of the safe channel and white over the channel
itself. A pilot who sees red has strayed from the fairway and must turn back toward the white. The sector edges are
set with brass shutters inside the lantern, adjusted every spring after the ice has gone.</p>
<h2>Leading lights at Kirkwall</h2>
<p>Two lights at different heights, one behind the other, mark the line of the channel into Kirkwall. When the upper
light stands exactly above the lower one, the ship is on the leading line. The rear light at Kirkwall burns at
thirty-one metres and the front light at eleven metres above high water.</p>
</body></html>`

// TestFolderFindsIt indexes a folder of files made by real producers —
// PDFs printed by Chromium here and by LibreOffice and groff + Ghostscript
// (testdata), Word, OpenDocument, EPUB and PowerPoint from pandoc, a web
// page with its navigation, cookie banner and footer, a notebook, an
// e-mail, a mailbox, a workbook — and anna's own code, with the default
// model, and asks questions whose answer lives in one file (one page,
// section or line range): the first hit is that file, at that place.
func TestFolderFindsIt(t *testing.T) {
	if _, err := home.RequireDefaultModel(); err != nil {
		t.Skipf("default model not installed (make setup): %v", err)
	}
	ctx := context.Background()
	root := t.TempDir()
	fixtures, err := filepath.Glob("../format/files/testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fixtures {
		if fi, err := os.Stat(f); err != nil || fi.IsDir() { // testdata/fuzz: the fuzz targets' corpora
			continue
		}
		switch filepath.Ext(f) {
		case ".sh", ".py", ".csv", ".ms": // the sources of fixtures
			continue
		}
		copyFile(t, f, filepath.Join(root, "docs", filepath.Base(f)))
	}
	html := filepath.Join(t.TempDir(), "atlas.html")
	os.WriteFile(html, []byte(atlas), 0o644)
	printed := chromiumPDF(t, html, filepath.Join(root, "docs", "atlas-chromium.pdf"))
	for _, f := range []string{"write.go", "location.go"} {
		copyFile(t, filepath.Join("../engine", f), filepath.Join(root, "code", "engine", f))
	}
	for _, f := range []string{"watch.go"} {
		copyFile(t, f, filepath.Join(root, "code", "ingest", f))
	}
	eng, err := engine.Open(ctx, t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	start := time.Now()
	fs, err := ingest.Dir(ctx, eng, root, ingest.FolderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d files read into %d documents in %v; skipped: %v", fs.FilesRead, fs.Added, time.Since(start).Round(time.Millisecond), fs.Skipped)
	cases := []struct {
		query, where string // where: the first hit's location (engine.Location.String), or its start
		filter       engine.Filter
		line         int    // a line the location's range holds
		symbol       string // the symbol the hit names
	}{
		{query: "which lights mark the line of the channel into Kirkwall and how high do they burn", where: "docs/atlas-chromium.pdf:page 3"},
		{query: "what colour does a sector light show over dangerous water", where: "docs/atlas-chromium.pdf:page 2"},
		{query: "where was the hyperradiant lens from Paris installed", where: "docs/report-ghostscript.pdf:page 2"},
		{query: "what pay increase did the principal keepers receive for the long winter without relief", where: "docs/report-ghostscript.pdf:page 1"},
		{query: "how long do the crystals take to settle after the tube is sealed", where: "docs/site.html § Making your own"},
		{query: "who kept the Fastnet light and what burner did it use", where: "docs/keepers.xlsx § keepers (rows 1-5)"},
		{query: "when will the relief boat sail", where: "docs/message.eml"},
		{query: "gannets diving near the rock", where: "docs/archive.mbox § message 2"},
		// The handbook in each format: the section (or page) that holds the answer.
		{query: "how long can the station go without a landing in January", where: "docs/handbook-libreoffice.pdf:page 2", filter: engine.Eq("format", "pdf")},
		{query: "what is the rhythm of the station's fog signal", where: "docs/handbook.docx § The Lighthouse Keeper’s Handbook › The Fog Signal", filter: engine.Eq("format", "docx")},
		{query: "what is the rhythm of the station's fog signal", where: "docs/handbook.odt § The Lighthouse Keeper’s Handbook › The Fog Signal", filter: engine.Eq("format", "odt")},
		{query: "what is the rhythm of the station's fog signal", where: "docs/handbook.epub § The Lighthouse Keeper’s Handbook › The Fog Signal", filter: engine.Eq("format", "epub")},
		{query: "what is the rhythm of the station's fog signal", where: "docs/handbook.ipynb § The Lighthouse Keeper’s Handbook › The Fog Signal (cell 1)", filter: engine.Eq("format", "notebook")},
		{query: "how often must the paraffin lamp wick be trimmed", where: "docs/handbook.md:", line: 14, filter: engine.Eq("format", "markdown")},
		// anna's own code: the function, at its lines.
		{query: "add documents and remove others in a single commit", where: "code/engine/write.go:", symbol: "Engine.Apply|Engine.apply", filter: engine.Eq("format", "code")},
		{query: "wait until the folder has been quiet before syncing after file system events", where: "code/ingest/watch.go:", symbol: "watcher.loop|Watch|WatchOptions", filter: engine.Eq("format", "code")},
		{query: "parse a line range like 12-40 from metadata", where: "code/engine/location.go:", symbol: "parseLines", filter: engine.Eq("format", "code")},
	}
	for _, c := range cases {
		if !printed && strings.Contains(c.where, "chromium") {
			continue
		}
		rs, err := eng.Search(ctx, c.query, engine.SearchOptions{K: 5, Snippets: true, Filter: c.filter})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			got = append(got, r.Location.String())
		}
		ok := len(got) > 0 && strings.HasPrefix(got[0], c.where)
		if ok && c.line > 0 {
			l := rs[0].Location
			ok = l.StartLine <= c.line && c.line <= max(l.EndLine, l.StartLine)
		}
		if ok && c.symbol != "" {
			ok = slices.ContainsFunc(strings.Split(c.symbol, "|"), func(s string) bool {
				return slices.Contains(strings.Split(rs[0].Meta["symbol"], ", "), s)
			})
		}
		if !ok {
			t.Errorf("%q: first %q (symbol %q), want %q (line %d, symbol %q)\n  all: %q", c.query, first(got), first(rs).Meta["symbol"], c.where, c.line, c.symbol, got)
		} else {
			t.Logf("%q → %s %s", c.query, got[0], rs[0].Meta["symbol"])
		}
	}
}

func first[T any](s []T) T {
	var zero T
	if len(s) == 0 {
		return zero
	}
	return s[0]
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
