package benchmarks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/anna-search/anna/format/files"
)

// BenchmarkPDFText reads the PDFs of tools/pdfcompare/make-corpus.sh (each
// beside its source text, pNNN.txt; the folder in $ANNA_PDF_CORPUS) with
// format/files' PDF reader, as indexing does, and scores the words against
// the source the way tools/pdfcompare does: word recall and precision
// (multisets of lower-case letters-and-digits words, hyphenated line ends
// joined) and bigram recall (reading order), and the time per page.
//
//	tools/pdfcompare/make-corpus.sh /tmp/pdfcorpus
//	ANNA_PDF_CORPUS=/tmp/pdfcorpus go test ./benchmarks -run '^$' -bench PDFText -benchtime 1x
func BenchmarkPDFText(b *testing.B) {
	dir := os.Getenv("ANNA_PDF_CORPUS")
	if dir == "" {
		b.Skip("set ANNA_PDF_CORPUS to a folder made by tools/pdfcompare/make-corpus.sh")
	}
	f, ok := files.Lookup("x.pdf")
	if !ok {
		b.Fatal("no pdf reader")
	}
	pdfs, _ := filepath.Glob(filepath.Join(dir, "*-00[0-9].pdf"))
	sort.Strings(pdfs)
	var tbl strings.Builder
	fmt.Fprintf(&tbl, "\n| file | pages | word recall | word precision | bigram recall | ms/page |\n|---|---|---|---|---|---|\n")
	for _, p := range pdfs {
		num := strings.TrimSuffix(p[strings.LastIndex(p, "-")+1:], ".pdf")
		src, err := os.ReadFile(filepath.Join(dir, "p"+num+".txt"))
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		d, err := f.Read(context.Background(), p, filepath.Base(p), files.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		el := time.Since(t0)
		var text strings.Builder
		for _, part := range d.Parts {
			text.WriteString(part.Text)
			text.WriteString("\n")
		}
		r, pr, bi := pdfScore(pdfWords(string(src)), pdfWords(text.String()))
		fmt.Fprintf(&tbl, "| %s | %d | %.3f | %.3f | %.3f | %.1f |\n", filepath.Base(p), len(d.Parts), r, pr, bi, float64(el.Microseconds())/1000/float64(max(1, len(d.Parts))))
	}
	fmt.Print(tbl.String())
}

func pdfWords(s string) []string {
	s = strings.ReplaceAll(s, "-\r\n", "")
	s = strings.ReplaceAll(s, "-\n", "")
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
}

func pdfScore(ref, got []string) (recall, precision, bigram float64) {
	bag, gotBag := map[string]int{}, map[string]int{}
	for _, w := range ref {
		bag[w]++
	}
	for _, w := range got {
		gotBag[w]++
	}
	hit := 0
	for w, n := range bag {
		hit += min(n, gotBag[w])
	}
	recall = float64(hit) / float64(len(ref))
	if len(got) > 0 {
		precision = float64(hit) / float64(len(got))
	}
	bi := map[string]int{}
	for i := 1; i < len(got); i++ {
		bi[got[i-1]+" "+got[i]]++
	}
	bh := 0
	for i := 1; i < len(ref); i++ {
		if k := ref[i-1] + " " + ref[i]; bi[k] > 0 {
			bi[k]--
			bh++
		}
	}
	return recall, precision, float64(bh) / float64(len(ref)-1)
}
