package ingest

import (
	"testing"

	"github.com/anna-search/anna/format/files"
)

// TestDocumentsLanguage: a file's documents carry its language — the one
// its format declares, else the one package lang is sure of in its text,
// never a guess for code — in Document.Language (so BM25 analyses them as
// written) and in the lang metadata key (so a filter can pick them).
func TestDocumentsLanguage(t *testing.T) {
	f := files.File{Rel: "notes/x.md"}
	cases := []struct {
		name, format string
		doc          files.Doc
		want         string
	}{
		{"declared", "html", files.Doc{Lang: "de-DE", Parts: []files.Part{{Text: "The text says nothing of its language."}}}, "de"},
		{"declared auto", "html", files.Doc{Lang: "auto", Parts: []files.Part{{Text: "北京是中华人民共和国的首都，也是全国的政治和文化中心。"}}}, "zh"},
		{"detected Chinese", "markdown", files.Doc{Parts: []files.Part{{Text: "北京是中华人民共和国的首都，也是全国的政治和文化中心。"}}}, "zh"},
		{"detected Japanese", "text", files.Doc{Parts: []files.Part{{Text: "東京は日本の首都であり、多くの人々が住んでいます。"}}}, "ja"},
		{"detected German", "markdown", files.Doc{Title: "Die Geschichte der Stadt", Parts: []files.Part{{Text: "Die Stadt wurde im zwölften Jahrhundert gegründet und war lange Zeit ein wichtiges Zentrum des Handels zwischen dem Norden und dem Süden des Landes."}}}, "de"},
		{"unsure short", "text", files.Doc{Parts: []files.Part{{Text: "ok"}}}, ""},
		{"code", "code", files.Doc{Parts: []files.Part{{Text: "// Die Stadt wurde im zwölften Jahrhundert gegründet und war lange Zeit ein wichtiges Zentrum.\nfunc f() {}", Code: "go"}}}, ""},
	}
	for _, c := range cases {
		docs := Documents(f, c.format, c.doc)
		if len(docs) != len(c.doc.Parts) {
			t.Fatalf("%s: %d documents from %d parts", c.name, len(docs), len(c.doc.Parts))
		}
		for _, d := range docs {
			if d.Language != c.want || d.Meta[MetaLang] != c.want {
				t.Errorf("%s: Language %q, meta lang %q; want %q", c.name, d.Language, d.Meta[MetaLang], c.want)
			}
		}
	}
}
