package doc2query

import (
	"errors"
	"strings"
	"testing"

	"github.com/anna-search/anna/format/beir"
)

// TestRefusesLanguages: a model that writes English drops the few Chinese
// documents of an English corpus and refuses a corpus mostly in Chinese,
// naming the languages; a model whose languages are unknown takes all.
func TestRefusesLanguages(t *testing.T) {
	en := []beir.Doc{
		{ID: "1", Text: "The Denver Broncos won Super Bowl 50 against the Carolina Panthers in February 2016."},
		{ID: "2", Text: "The cats were running through the gardens of the old house while the dogs slept."},
		{ID: "3", Text: "Photosynthesis converts light energy into chemical energy stored in glucose molecules."},
	}
	zh := []beir.Doc{
		{ID: "4", Text: "北京是中华人民共和国的首都，也是全国的政治和文化中心。"},
		{ID: "5", Text: "长城是中国古代的军事防御工程，全长两万多公里。"},
		{ID: "6", Text: "上海是中国最大的经济中心城市之一，人口众多。"},
		{ID: "7", Language: "de", Text: "Kurz."},
	}
	g := &Generator{path: "SmolLM2-135M-Instruct.Q4_1.gguf", langs: modelLanguages(map[string]any{}, "SmolLM2-135M-Instruct.Q4_1.gguf")}
	keep, err := g.writable(append(append([]beir.Doc(nil), en...), zh[0]))
	if err != nil || len(keep) != len(en) {
		t.Fatalf("English corpus with one Chinese document: kept %d, %v", len(keep), err)
	}
	_, err = g.writable(append(append([]beir.Doc(nil), zh...), en[0]))
	if !errors.Is(err, ErrLanguage) || !strings.Contains(err.Error(), "zh (3)") || !strings.Contains(err.Error(), "de (1)") {
		t.Fatalf("Chinese corpus: %v", err)
	}
	g.langs = nil
	if keep, err := g.writable(zh); err != nil || len(keep) != len(zh) {
		t.Fatalf("unknown languages: kept %d, %v", len(keep), err)
	}
	if l := modelLanguages(map[string]any{"general.languages": []any{"en", "fr"}}, "x.gguf"); strings.Join(l, ",") != "en,fr" {
		t.Fatalf("general.languages: %v", l)
	}
}
