package lang

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/format/beir"
	"github.com/anna-search/anna/internal/shareddata"
)

// Real sentences in each script: Detect names them, and each language's
// analyzer reads them as that language should be read.
var samples = []struct {
	lang, text string
	want       []string // terms the analyzer must produce
}{
	{"en", "The cats were running through the gardens of the old house.", []string{"cat", "run", "garden"}},
	{"de", "Die Katzen liefen durch die Gärten des alten Hauses.", []string{"katz", "gart", "haus"}},
	{"es", "Los gatos corrían por los jardines de la casa antigua.", []string{"gat", "jardin"}},
	{"fr", "Les chats couraient dans les jardins de la vieille maison.", []string{"chat", "jardin"}},
	{"ru", "Кошки бегали по садам старого дома, а собаки спали у ворот и ждали хозяина, который был в городе.", []string{"кошк", "сад"}},
	{"ar", "كانت القطط تركض في حدائق المنزل القديم.", []string{"قطط", "حدائق"}},
	{"fa", "گربه‌ها در باغ‌های خانه قدیمی می‌دویدند و سگ‌ها کنار در منتظر صاحب خانه بودند.", []string{"خانه"}},
	{"hi", "बिल्लियाँ पुराने घर के बगीचों में दौड़ रही थीं।", []string{"बगिच"}},
	{"zh", "猫在老房子的花园里奔跑。", []string{"花园", "房子"}},
	{"ja", "猫たちは古い家の庭を走り回っていた。", []string{"走り", "回っ"}},
	{"ko", "고양이들이 오래된 집의 정원을 뛰어다녔다.", []string{"정원", "고양"}},
	{"th", "แมววิ่งเล่นในสวนของบ้านหลังเก่า", []string{"สว", "บ้"}},
}

func TestDetectAndAnalyzers(t *testing.T) {
	for _, s := range samples {
		// One sentence is too little for the trigrams to tell Persian from
		// Arabic (whole paragraphs are told apart); it is left to the
		// analyzer check.
		if got := Detect(s.text); got != s.lang && s.lang != "fa" {
			t.Errorf("Detect(%q) = %q, want %q", s.text, got, s.lang)
		}
		a, err := Analyzer(s.lang)
		if err != nil {
			t.Fatal(err)
		}
		terms := map[string]bool{}
		for _, tok := range a.Analyze([]byte(s.text)) {
			terms[string(tok.Term)] = true
			if string(tok.Term) != strings.ToLower(s.text[tok.Start:tok.End]) && s.lang == "th" {
				t.Errorf("%s: token %q at %d:%d reads %q in the text", s.lang, tok.Term, tok.Start, tok.End, s.text[tok.Start:tok.End])
			}
		}
		for _, w := range s.want {
			if !terms[w] {
				t.Errorf("%s analyzer %s: no term %q in %v", s.lang, AnalyzerName(s.lang), w, keys(terms))
			}
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestAnalyzerChoice(t *testing.T) {
	for code, want := range map[string]string{
		"en": "en", "de": "de", "ar": "ar", "fa": "fa", "hi": "hi", "ru": "ru", "nb": "no",
		"zh": NameCJK, "ja": NameCJK, "ko": NameBigram, "th": NameBigram, "km": NameBigram,
		"vi": NameStandard, "": NameStandard, "xx": NameStandard,
	} {
		if got := AnalyzerName(code); got != want {
			t.Errorf("AnalyzerName(%q) = %q, want %q", code, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"en": "en", "EN": "en", "en-US": "en", "zh_Hant": "zh", "deu": "de", "German": "de",
		"auto": "auto", "": "", "nb": "no", "cmn": "zh",
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"xx", "klingon", "e"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
}

func TestDetectBounded(t *testing.T) {
	long := strings.Repeat("Die Katzen liefen durch die Gärten des alten Hauses. ", 100000)
	start := time.Now()
	if got := Detect(long); got != "de" {
		t.Errorf("Detect(5 MB of German) = %q", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Detect read 5 MB in %v: not bounded", d)
	}
	if got := Detect(""); got != "" {
		t.Errorf("Detect(\"\") = %q", got)
	}
}

// TestDetectQueries measures Detect on the shared sets' questions (short
// texts) and paragraphs: the share named right, "" (left to the default) and
// wrong, and the cost per text. It fails only below floors far under what it
// measures, so that a detector gone wrong is caught.
func TestDetectQueries(t *testing.T) {
	type set struct{ name, lang string }
	sets := []set{{"xquad-en", "en"}, {"xquad-de", "de"}, {"xquad-es", "es"}, {"xquad-zh", "zh"},
		{"xquad-ar", "ar"}, {"xquad-ru", "ru"}, {"xquad-hi", "hi"}, {"jsquad", "ja"}}
	for _, s := range sets {
		dir := shareddata.Path(t, "datasets", s.name)
		qs, err := beir.ReadQueriesFile(beir.QueriesPath(dir))
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, q := range qs {
			texts = append(texts, q)
		}
		measure(t, s.name+" queries", s.lang, texts, 0.5)
		ds, err := beir.Load(dir, "test")
		if err != nil {
			t.Fatal(err)
		}
		texts = texts[:0]
		for _, d := range ds.Corpus {
			texts = append(texts, d.Title+" "+d.Text)
		}
		measure(t, s.name+" paragraphs", s.lang, texts, 0.9)
	}
}

func measure(t *testing.T, name, lang string, texts []string, floor float64) {
	{
		right, none := 0, 0
		start := time.Now()
		for _, q := range texts {
			switch Detect(q) {
			case lang:
				right++
			case "":
				none++
			}
		}
		per := time.Since(start) / time.Duration(len(texts))
		n := float64(len(texts))
		t.Logf("%-20s %5d: right %.3f, undecided %.3f, wrong %.3f; %v per text",
			name, len(texts), float64(right)/n, float64(none)/n, (n-float64(right+none))/n, per)
		if float64(right)/n < floor {
			t.Errorf("%s: only %.3f detected as %s", name, float64(right)/n, lang)
		}
	}
}

var _ = fmt.Sprint
