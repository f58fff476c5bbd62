package benchmarks

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/files"
	"github.com/anna-search/anna/ingest"
	"github.com/anna-search/anna/internal/encodertest"
	"github.com/anna-search/anna/internal/shareddata"
)

// BenchmarkFolderUnchanged times `annactl index FOLDER` run again over a
// folder of ANNA_BENCH_FILES (default 10,000) unchanged Markdown files in
// 100 folders: the listing, the engine's documents read back and every
// file's size and time compared — nothing parsed, nothing embedded (both
// checked). The reference is the first run over the same folder (parsing
// and storing everything; the encoder is feature hashing, so the model's
// time is left out of both). Goal: the re-run within 5 s at 10,000 files.
func BenchmarkFolderUnchanged(b *testing.B) {
	n := 10000
	if s := os.Getenv("ANNA_BENCH_FILES"); s != "" {
		fmt.Sscan(s, &n)
	}
	ctx := context.Background()
	root, dir := b.TempDir(), b.TempDir()
	for i := range n {
		p := filepath.Join(root, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("note-%05d.md", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		body := fmt.Sprintf("# Note %d\n\nThe keeper of station %d logged the weather at %d o'clock: wind from the %s, sea state %d.\n",
			i, i, i%24, []string{"north", "south", "east", "west"}[i%4], i%9)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	enc := &encodertest.Counting{Hashing: &encodertest.Hashing{D: 384, FP: "hash-384"}}
	eng, err := engine.Open(ctx, dir, engine.Options{Encoder: enc})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	start := time.Now()
	fs, err := ingest.Dir(ctx, eng, root, ingest.FolderOptions{})
	if err != nil || fs.FilesRead != n {
		b.Fatalf("first run: %+v %v", fs, err)
	}
	first := time.Since(start)
	embedded := enc.Embedded()
	waitIdle(b)
	b.ResetTimer()
	var again time.Duration
	for range b.N {
		start := time.Now()
		fs, err := ingest.Dir(ctx, eng, root, ingest.FolderOptions{})
		again += time.Since(start)
		if err != nil || fs.FilesRead != 0 || fs.FilesUnchanged != n || enc.Embedded() != embedded {
			b.Fatalf("re-run: %+v %v, %d texts embedded", fs, err, enc.Embedded()-embedded)
		}
	}
	per := again / time.Duration(b.N)
	b.ReportMetric(per.Seconds(), "s/rerun")
	b.ReportMetric(first.Seconds(), "s/first")
	b.Logf("%d unchanged files: re-run %.2f s (nothing parsed or embedded), first run %.1f s (%.1fx)", n, per.Seconds(), first.Seconds(), first.Seconds()/per.Seconds())
}

// BenchmarkParsing builds a folder per format from the papers in
// ../shared/papers with the real producers (pandoc, LibreOffice, headless
// Chromium, Python's email library; a format whose tool is missing is
// left out) and anna's own Go code, then for each format times reading
// every file (package files, the parse alone) and indexing the folder with
// the default model at annactl's precision (parse, embed, store): the
// parse's share of indexing time per format. Goal: 10 % or less.
// ANNA_BENCH_FORMATS (a regular expression) times only the formats it
// matches.
func BenchmarkParsing(b *testing.B) {
	papers := shareddata.Path(b, "papers")
	model := hybridModel(b)
	ctx := context.Background()
	src := b.TempDir()
	folders := makeFormatFolders(b, papers, src)
	type row struct {
		format       string
		files, parts int
		text         int
		parse, index time.Duration
	}
	var rows []row
	names := make([]string, 0, len(folders))
	only := regexp.MustCompile(os.Getenv("ANNA_BENCH_FORMATS")) // "": every format
	for name := range folders {
		if only.MatchString(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	b.ResetTimer()
	for _, name := range names {
		folder := folders[name]
		list, err := files.List(ctx, folder, files.Options{})
		if err != nil {
			b.Fatal(err)
		}
		r := row{format: name}
		start := time.Now()
		for _, f := range list {
			if f.Skip != "" {
				continue
			}
			ft, _ := files.Lookup(f.Rel)
			d, err := ft.Read(ctx, filepath.Join(folder, f.Rel), f.Rel, files.Limits{})
			if err != nil {
				b.Fatalf("%s: %v", f.Rel, err)
			}
			r.files++
			r.parts += len(d.Parts)
			for _, p := range d.Parts {
				r.text += len(p.Text)
			}
		}
		r.parse = time.Since(start)
		eng, err := engine.Open(ctx, b.TempDir(), engine.Options{Model: model})
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if _, err := ingest.Dir(ctx, eng, folder, ingest.FolderOptions{}); err != nil {
			b.Fatal(err)
		}
		r.index = time.Since(start)
		eng.Close()
		rows = append(rows, r)
	}
	b.StopTimer()
	var out strings.Builder
	fmt.Fprintf(&out, "| format | files | parts | text (KB) | parse (ms) | index (s) | parse share |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&out, "| %s | %d | %d | %d | %.0f | %.1f | %.1f %% |\n", r.format, r.files, r.parts, r.text>>10,
			float64(r.parse.Microseconds())/1000, r.index.Seconds(), 100*r.parse.Seconds()/r.index.Seconds())
	}
	// The table on stdout: a benchmark's log keeps only its first lines.
	fmt.Printf("model %s\n%s", filepath.Base(model), out.String())
}

// makeFormatFolders writes one folder per format under dir from the
// papers' text, with the producers that are installed.
func makeFormatFolders(b *testing.B, papers, dir string) map[string]string {
	b.Helper()
	txts, _ := filepath.Glob(filepath.Join(papers, "*.txt"))
	if len(txts) == 0 {
		b.Skip("no papers")
	}
	out := map[string]string{}
	folder := func(name string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(p, 0o755)
		out[name] = p
		return p
	}
	has := func(tool string) bool { _, err := exec.LookPath(tool); return err == nil }
	run := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		if o, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s %v: %v\n%s", name, args, err, o)
		}
	}
	md := folder("markdown")
	txt := folder("text")
	for _, t := range txts {
		body, _ := os.ReadFile(t)
		base := strings.TrimSuffix(filepath.Base(t), ".txt")
		// Paragraphs as Markdown, the first line its title.
		lines := strings.SplitN(string(body), "\n", 2)
		m := "# " + strings.TrimSpace(lines[0]) + "\n\n" + strings.NewReplacer("*", " ", "_", " ", "#", " ", "`", " ", "<", " ", ">", " ", "\\", " ").Replace(lines[1])
		os.WriteFile(filepath.Join(md, base+".md"), []byte(m), 0o644)
		os.WriteFile(filepath.Join(txt, base+".txt"), body, 0o644)
	}
	mds, _ := filepath.Glob(filepath.Join(md, "*.md"))
	if has("pandoc") {
		for _, f := range []string{"docx", "odt", "epub", "pptx", "html", "ipynb"} {
			d := folder(f)
			for _, m := range mds {
				run("pandoc", m, "-s", "-o", filepath.Join(d, strings.TrimSuffix(filepath.Base(m), ".md")+"."+f))
			}
		}
		if has("soffice") {
			odts, _ := filepath.Glob(filepath.Join(out["odt"], "*.odt"))
			run("soffice", append([]string{"--headless", "--convert-to", "pdf", "--outdir", folder("pdf-libreoffice")}, odts...)...)
		}
		if chrome := firstTool("chromium", "chromium-browser"); chrome != "" {
			d := folder("pdf-chromium")
			htmls, _ := filepath.Glob(filepath.Join(out["html"], "*.html"))
			for _, h := range htmls {
				run(chrome, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer", "--user-data-dir="+b.TempDir(),
					"--print-to-pdf="+filepath.Join(d, strings.TrimSuffix(filepath.Base(h), ".html")+".pdf"), "file://"+h)
			}
		}
	}
	if has("python3") {
		mb := filepath.Join(folder("mbox"), "papers.mbox")
		py := `import mailbox, sys, glob, os
from email.message import EmailMessage
box = mailbox.mbox(sys.argv[1], create=True)
for t in sorted(glob.glob(os.path.join(sys.argv[2], "*.txt"))):
    text = open(t, encoding="utf-8").read()
    for i, chunk in enumerate(text.split("\n\n")[:400:8]):
        m = EmailMessage()
        m["Subject"] = "%s part %d" % (os.path.basename(t), i)
        m["From"] = "reader@example.org"
        m.set_content(chunk)
        box.add(m)
box.flush()
`
		run("python3", "-c", py, mb, papers)
	}
	// Code: anna's own engine.
	code := folder("code-go")
	gos, _ := filepath.Glob("../engine/*.go")
	for _, g := range gos {
		if strings.HasSuffix(g, "_test.go") {
			continue
		}
		body, _ := os.ReadFile(g)
		os.WriteFile(filepath.Join(code, filepath.Base(g)), body, 0o644)
	}
	return out
}

func firstTool(names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}
