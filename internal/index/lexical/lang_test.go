package lexical

import (
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"testing"

	"github.com/blevesearch/bleve/v2/document"
	bindex "github.com/blevesearch/bleve_index_api"

	"github.com/anna-search/anna/internal/storage"
	"github.com/anna-search/anna/lang"
)

// mixed is one document per script, each written as its language is.
var mixed = []storage.Doc{
	{ID: "en", Title: "Gardens", Text: "The cats were running through the gardens of the old house while the dogs slept."},
	{ID: "de", Title: "Gärten", Text: "Die Katzen liefen durch die Gärten des alten Hauses, während die Hunde schliefen."},
	{ID: "es", Text: "Los gatos corrían por los jardines de la casa antigua mientras los perros dormían."},
	{ID: "ru", Text: "Кошки бегали по садам старого дома, пока собаки спали у ворот и ждали хозяина, который был в городе."},
	{ID: "ar", Text: "كانت القطط تركض في حدائق المنزل القديم بينما كانت الكلاب نائمة عند الباب."},
	{ID: "hi", Text: "बिल्लियाँ पुराने घर के बगीचों में दौड़ रही थीं जबकि कुत्ते दरवाज़े के पास सो रहे थे।"},
	{ID: "zh", Text: "猫在老房子的花园里奔跑，狗在门口睡觉。"},
	{ID: "ja", Text: "猫たちは古い家の庭を走り回り、犬は門のそばで眠っていた。"},
	{ID: "ko", Text: "고양이들이 오래된 집의 정원을 뛰어다니는 동안 개들은 문 옆에서 잤다."},
	{ID: "th", Text: "แมววิ่งเล่นในสวนของบ้านหลังเก่าขณะที่สุนัขนอนหลับอยู่ที่ประตู"},
}

// TestMixedLanguages: one index holds documents in ten languages, each
// analysed for its own (detected, or given: Korean and Thai here), and a
// query in any of them finds its document first, its words inflected
// otherwise than in the document where the language has stems.
func TestMixedLanguages(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(filepath.Join(t.TempDir(), "lex"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	docs := append([]storage.Doc(nil), mixed...)
	docs[8].Language, docs[9].Language = "ko", "th"
	if err := ix.Index(ctx, docs, 1); err != nil {
		t.Fatal(err)
	}
	langs, err := ix.Languages()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"en": 1, "de": 1, "es": 1, "ru": 1, "ar": 1, "hi": 1, "zh": 1, "ja": 1, "ko": 1, "th": 1}
	if !maps.Equal(langs, want) {
		t.Fatalf("languages %v, want %v", langs, want)
	}
	for id, q := range map[string]string{
		"en": "cat running in a garden",
		"de": "Katze im Garten",
		"es": "gato jardín",
		"ru": "кошка в саду",
		"ar": "القطط الحدائق",
		"hi": "बगीचों में बिल्लियाँ",
		"zh": "花园里的猫",
		"ja": "庭を走り回る",
		"ko": "정원에서",
		"th": "สวนของบ้าน",
	} {
		hits, err := ix.Search(ctx, q, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 || hits[0].ID != id {
			t.Errorf("%s query %q: hits %v, want %s first", id, q, hits, id)
		}
	}
	if problems, err := ix.Check(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("check: %v %v", problems, err)
	}
	// Deleting and re-adding moves the counts.
	if err := ix.Delete(ctx, []string{"de", "zh"}, 2); err != nil {
		t.Fatal(err)
	}
	docs[0].Language = "de" // given, it wins over detection
	if err := ix.Index(ctx, docs[:1], 3); err != nil {
		t.Fatal(err)
	}
	langs, _ = ix.Languages()
	delete(want, "zh")
	delete(want, "en")
	if !maps.Equal(langs, want) {
		t.Fatalf("after delete and re-add: languages %v, want %v", langs, want)
	}
	if problems, err := ix.Check(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("check: %v %v", problems, err)
	}
}

// TestLanguageOption: Options.Language is the language of documents that
// name none; a bad one is refused.
func TestLanguageOption(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(filepath.Join(t.TempDir(), "lex"), Options{Language: "German"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Index(ctx, mixed[:1], 1); err != nil { // English text, said to be German
		t.Fatal(err)
	}
	if l, _ := ix.Languages(); !maps.Equal(l, map[string]uint64{"de": 1}) {
		t.Fatalf("languages %v", l)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "bad"), Options{Language: "klingon"}); err == nil {
		t.Fatal("Options.Language klingon accepted")
	}
}

// TestIndexBeforeLanguages: an index written before languages were recorded
// (English analysis, field lengths without a language, no counts) opens as
// it is, holds English, and keeps its documents findable by English queries
// once documents in other languages join it.
func TestIndexBeforeLanguages(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(filepath.Join(t.TempDir(), "lex"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	// Written as the code before languages did.
	en, _ := lang.Analyzer(lang.English)
	b := ix.bi.NewBatch()
	var st stats
	for f, text := range [len(fields)]string{mixed[0].Title, mixed[0].Text} {
		toks := en.Analyze([]byte(text))
		st.Len[f] = uint64(len(toks))
		_ = f
	}
	doc := document.NewDocument("old")
	doc.AddField(document.NewTextFieldCustom(fieldTitle, nil, nil, indexOpts, analyzed(en.Analyze([]byte(mixed[0].Title)))))
	doc.AddField(document.NewTextFieldCustom(fieldText, nil, nil, indexOpts, analyzed(en.Analyze([]byte(mixed[0].Text)))))
	doc.AddField(document.NewTextFieldCustom(fieldLens, nil, []byte(encodeOld(st.Len)), bindex.StoreField, nil))
	if err := b.IndexAdvanced(doc); err != nil {
		t.Fatal(err)
	}
	sj, _ := json.Marshal(st)
	b.SetInternal(keyStats, sj)
	if err := ix.bi.Batch(b); err != nil {
		t.Fatal(err)
	}
	if l, _ := ix.Languages(); l != nil {
		t.Fatalf("languages of an index before them: %v", l)
	}
	if hits, _ := ix.Search(ctx, "cat running", 1); len(hits) != 1 || hits[0].ID != "old" {
		t.Fatalf("old index, English query: %v", hits)
	}
	if err := ix.Index(ctx, mixed[1:2], 2); err != nil { // German
		t.Fatal(err)
	}
	if l, _ := ix.Languages(); !maps.Equal(l, map[string]uint64{"en": 1, "de": 1}) {
		t.Fatalf("languages %v", l)
	}
	for q, id := range map[string]string{"cat running": "old", "Katze im Garten": "de"} {
		if hits, _ := ix.Search(ctx, q, 1); len(hits) != 1 || hits[0].ID != id {
			t.Errorf("%q: %v, want %s", q, hits, id)
		}
	}
	if problems, err := ix.Check(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("check: %v %v", problems, err)
	}
	if err := ix.Delete(ctx, []string{"old"}, 3); err != nil {
		t.Fatal(err)
	}
	if l, _ := ix.Languages(); !maps.Equal(l, map[string]uint64{"de": 1}) {
		t.Fatalf("languages after deleting the old document: %v", l)
	}
}

func encodeOld(l [len(fields)]uint64) string {
	b := encodeLens(l, "")
	return string(b[:len(b)-1]) // "t n" without the language
}

// TestCoverage: a query the index's language reads whole covers 1; one in
// a script the index does not hold covers only its names and numbers.
func TestCoverage(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(filepath.Join(t.TempDir(), "lex"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	docs := []storage.Doc{
		{ID: "a", Text: "The Denver Broncos won Super Bowl 50 against the Carolina Panthers in February 2016."},
		{ID: "b", Text: "The cats were running through the gardens of the old house while the dogs slept."},
	}
	if err := ix.Index(ctx, docs, 1); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string][2]float64{
		"Who won Super Bowl 50?": {1, 1},
		"cats in the garden":     {1, 1},
		"哪支球队赢得了超级碗？":            {0, 0},
		"丹佛野马队 Denver 在超级碗 50 中击败了哪支球队？": {0.01, 0.5}, // Denver and 50 alone
		"the of and": {0, 0}, // stop words only: no term
	} {
		c, err := ix.Coverage(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if c < want[0] || c > want[1] {
			t.Errorf("Coverage(%q) = %.3f, want %.2f..%.2f", q, c, want[0], want[1])
		}
	}
}
