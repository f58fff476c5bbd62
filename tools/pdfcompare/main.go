// pdfcmp compares two pure-Go PDF text extractors on PDFs whose source text
// is known: go-pdfium (PDFium compiled to WebAssembly, run by wazero) and
// ledongthuc/pdf (a Go PDF parser). For each PDF it prints word recall and
// precision against the source, bigram recall (reading order), and time.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/klippa-app/go-pdfium"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/ledongthuc/pdf"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

func words(s string) []string {
	// join hyphenated line ends the same way for every extractor
	s = strings.ReplaceAll(s, "-\r\n", "")
	s = strings.ReplaceAll(s, "-\n", "")
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
	return f
}

func score(ref, got []string) (recall, precision, bigram float64) {
	bag := map[string]int{}
	for _, w := range ref {
		bag[w]++
	}
	gotBag := map[string]int{}
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
		k := ref[i-1] + " " + ref[i]
		if bi[k] > 0 {
			bi[k]--
			bh++
		}
	}
	bigram = float64(bh) / float64(len(ref)-1)
	return
}

func pdfiumText(inst pdfium.Pdfium, data []byte) (string, int, error) {
	doc, err := inst.OpenDocument(&requests.OpenDocument{File: &data})
	if err != nil {
		return "", 0, err
	}
	defer inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: doc.Document})
	pc, err := inst.FPDF_GetPageCount(&requests.FPDF_GetPageCount{Document: doc.Document})
	if err != nil {
		return "", 0, err
	}
	var b strings.Builder
	for i := 0; i < pc.PageCount; i++ {
		t, err := inst.GetPageText(&requests.GetPageText{Page: requests.Page{ByIndex: &requests.PageByIndex{Document: doc.Document, Index: i}}})
		if err != nil {
			return "", 0, err
		}
		b.WriteString(t.Text)
		b.WriteString("\n")
	}
	return b.String(), pc.PageCount, nil
}

func goText(data []byte) (s string, pages int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", 0, err
	}
	var b strings.Builder
	for i := 1; i <= r.NumPage(); i++ {
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		rows, err := p.GetTextByRow()
		if err != nil {
			return "", 0, err
		}
		for _, row := range rows {
			var line []string
			for _, w := range row.Content {
				line = append(line, w.S)
			}
			b.WriteString(strings.Join(line, " "))
			b.WriteString("\n")
		}
	}
	return b.String(), r.NumPage(), nil
}

func main() {
	dir := os.Args[1]
	t0 := time.Now()
	cache, _ := wazero.NewCompilationCacheWithDir(filepath.Join(os.TempDir(), "pdfcompare-wazero"))
	pool, err := webassembly.Init(webassembly.Config{MinIdle: 1, MaxIdle: 1, MaxTotal: 1, RuntimeConfig: wazero.NewRuntimeConfig().WithCoreFeatures(api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling).WithCompilationCache(cache)})
	if err != nil {
		panic(err)
	}
	inst, err := pool.GetInstance(30 * time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Printf("pdfium wasm init: %v\n", time.Since(t0).Round(time.Millisecond))
	files, _ := filepath.Glob(filepath.Join(dir, "*.pdf"))
	sort.Strings(files)
	fmt.Println("| file | pages | extractor | word recall | word precision | bigram recall | ms/page |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, f := range files {
		data, _ := os.ReadFile(f)
		base := filepath.Base(f)
		var ref []string
		if i := strings.LastIndex(base, "-"); i > 0 {
			if b, err := os.ReadFile(filepath.Join(dir, "p"+strings.TrimSuffix(base[i+1:], ".pdf")+".txt")); err == nil {
				ref = words(string(b))
			}
		}
		for _, ex := range []string{"go-pdfium (wasm)", "ledongthuc/pdf"} {
			var text string
			var pages int
			var err error
			const reps = 3
			t := time.Now()
			for r := 0; r < reps; r++ {
				if ex == "ledongthuc/pdf" {
					text, pages, err = goText(data)
				} else {
					text, pages, err = pdfiumText(inst, data)
				}
			}
			el := time.Since(t) / reps
			if err != nil {
				fmt.Printf("| %s | | %s | error: %v | | | |\n", base, ex, err)
				continue
			}
			ms := float64(el.Microseconds()) / 1000 / float64(max(pages, 1))
			if ref == nil {
				fmt.Printf("| %s | %d | %s | (no source) %d words | | | %.2f |\n", base, pages, ex, len(words(text)), ms)
				continue
			}
			rc, pr, bg := score(ref, words(text))
			fmt.Printf("| %s | %d | %s | %.3f | %.3f | %.3f | %.2f |\n", base, pages, ex, rc, pr, bg, ms)
		}
	}
}
