// Package lang names the language a text is written in and the analysis
// BM25 and the snippets give it.
//
// Languages are ISO 639-1 codes ("en", "de", "zh"). Parse accepts a code in
// any case, with a region ("pt-BR", "zh_Hant") or as an ISO 639-3 code or
// English name ("deu", "german"), and gives the two-letter code.
//
// Detect names a text's language with whatlanggo (github.com/abadojack/
// whatlanggo, MIT: Unicode scripts, then trigram profiles of 84 languages
// within the script). It reads at most DetectBytes of the text, so its cost
// is bounded whatever the text's length. Where the script settles it (Han,
// kana, Hangul, Thai, Greek...) the answer is the script's language, kana
// anywhere in a text making it Japanese, and a Cyrillic text with letters
// only Russian of its neighbours has Russian; a Latin, Cyrillic, Arabic or
// Devanagari text whose trigrams leave the choice unreliable gets "": the
// caller's default then applies. Its accuracy on short queries and its cost
// are measured by TestDetectQueries (docs/results/multilingual.md).
//
// Analyzer gives the Bleve analyzer of a language:
//
//   - Bleve's own language analyzers (stop words, normalisation, a stemmer)
//     for ar, ckb, da, de, en, es, fa, fi, fr, hi, hr, hu, it, nl, no, pt,
//     ro, ru, sv, tr; Arabic and Persian get Bleve's Arabic and Persian
//     normalisation, Hindi the Indic and Hindi normalisation;
//   - Chinese and Japanese: Bleve's CJK analysis (Unicode words, width
//     folding, lower case, overlapping bigrams of Han and kana) with each
//     character kept as well (NameCJK). BM25 nDCG@10, xquad-zh / jsquad:
//     characters alone 0.9518 / 0.9216, bigrams alone (Bleve's "cjk")
//     0.9108 / 0.9274, both 0.9660 / 0.9331 (docs/results/multilingual.md);
//   - Thai, Lao, Khmer and Myanmar, written without spaces between words,
//     whose runs Bleve's Unicode tokenizer drops (UAX #29 gives them no
//     word boundaries), and Korean, whose Hangul words carry their
//     particles: overlapping character bigrams of those scripts
//     (NameBigram), as CJK;
//   - any other language: Unicode words, lower-cased (NameStandard), no stop
//     words nor stemming.
//
// Every analyzer here is safe for concurrent use; Analyzer builds each once
// per process.
package lang

import (
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/abadojack/whatlanggo"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/ar"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/analysis/lang/ckb"
	"github.com/blevesearch/bleve/v2/analysis/lang/da"
	"github.com/blevesearch/bleve/v2/analysis/lang/de"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/lang/es"
	"github.com/blevesearch/bleve/v2/analysis/lang/fa"
	"github.com/blevesearch/bleve/v2/analysis/lang/fi"
	"github.com/blevesearch/bleve/v2/analysis/lang/fr"
	"github.com/blevesearch/bleve/v2/analysis/lang/hi"
	"github.com/blevesearch/bleve/v2/analysis/lang/hr"
	"github.com/blevesearch/bleve/v2/analysis/lang/hu"
	"github.com/blevesearch/bleve/v2/analysis/lang/it"
	"github.com/blevesearch/bleve/v2/analysis/lang/nl"
	"github.com/blevesearch/bleve/v2/analysis/lang/no"
	"github.com/blevesearch/bleve/v2/analysis/lang/pt"
	"github.com/blevesearch/bleve/v2/analysis/lang/ro"
	"github.com/blevesearch/bleve/v2/analysis/lang/ru"
	"github.com/blevesearch/bleve/v2/analysis/lang/sv"
	"github.com/blevesearch/bleve/v2/analysis/lang/tr"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	bunicode "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/registry"
)

// English is the language of an index made before languages were recorded,
// and what a text gets when nothing else tells.
const English = "en"

// Auto asks for detection (Detect) where a language can be given.
const Auto = "auto"

// Analyzer names of the analysis this package adds to Bleve's.
const (
	NameCJK      = "anna_cjk"      // Bleve's CJK analyzer with each ideograph and kana kept beside the bigrams
	NameBigram   = "anna_bigram"   // Unicode words; runs of Thai, Lao, Khmer or Myanmar as overlapping bigrams
	NameStandard = "anna_standard" // Unicode words, lower-cased
)

// bleveAnalyzers are the languages Bleve has an analyzer of the same name for.
var bleveAnalyzers = map[string]string{
	"ar": ar.AnalyzerName, "ckb": ckb.AnalyzerName, "da": da.AnalyzerName, "de": de.AnalyzerName,
	"en": en.AnalyzerName, "es": es.AnalyzerName, "fa": fa.AnalyzerName, "fi": fi.AnalyzerName,
	"fr": fr.AnalyzerName, "hi": hi.AnalyzerName, "hr": hr.AnalyzerName, "hu": hu.AnalyzerName,
	"it": it.AnalyzerName, "nl": nl.AnalyzerName, "no": no.AnalyzerName,
	"pt": pt.AnalyzerName, "ro": ro.AnalyzerName, "ru": ru.AnalyzerName, "sv": sv.AnalyzerName,
	"tr": tr.AnalyzerName,
	"zh": NameCJK, "ja": NameCJK, "ko": NameBigram,
	"th": NameBigram, "lo": NameBigram, "km": NameBigram, "my": NameBigram,
}

// AnalyzerName is the name of the Bleve analyzer language code gets (see the
// package doc); "" and unknown codes get NameStandard.
func AnalyzerName(code string) string {
	if code == "nb" || code == "nn" {
		code = "no"
	}
	if n, ok := bleveAnalyzers[code]; ok {
		return n
	}
	return NameStandard
}

var (
	cacheMu   sync.Mutex
	cache     = registry.NewCache()
	analyzers = map[string]analysis.Analyzer{}
)

// Analyzer returns the analyzer of language code (AnalyzerName), built once.
func Analyzer(code string) (analysis.Analyzer, error) {
	name := AnalyzerName(code)
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if a, ok := analyzers[name]; ok {
		return a, nil
	}
	var a analysis.Analyzer
	var err error
	switch name {
	case NameBigram, NameStandard, NameCJK:
		a, err = ownAnalyzer(name)
	default:
		a, err = cache.AnalyzerNamed(name)
	}
	if err != nil {
		return nil, fmt.Errorf("lang: analyzer %q of %q: %w", name, code, err)
	}
	analyzers[name] = a
	return a, nil
}

func ownAnalyzer(name string) (analysis.Analyzer, error) {
	tok, err := cache.TokenizerNamed(bunicode.Name)
	if err != nil {
		return nil, err
	}
	lower, err := cache.TokenFilterNamed(lowercase.Name)
	if err != nil {
		return nil, err
	}
	a := &analysis.DefaultAnalyzer{Tokenizer: tok, TokenFilters: []analysis.TokenFilter{lower}}
	if name == NameCJK {
		width, err := cache.TokenFilterNamed(cjk.WidthName)
		if err != nil {
			return nil, err
		}
		a.TokenFilters = []analysis.TokenFilter{width, lower, cjk.NewCJKBigramFilter(true)}
	}
	if name == NameBigram {
		a.Tokenizer = runTokenizer{tok}
		a.TokenFilters = append(a.TokenFilters, bigramFilter{})
	}
	return a, nil
}

// runTokenizer is Bleve's Unicode tokenizer with the runs of unspaced
// letters it drops (Thai, Lao, Khmer, Myanmar: UAX #29 gives them no word
// boundaries) added back as tokens, in text order.
type runTokenizer struct{ base analysis.Tokenizer }

func (r runTokenizer) Tokenize(input []byte) analysis.TokenStream {
	base := r.base.Tokenize(input)
	var runs analysis.TokenStream
	for i := 0; i < len(input); {
		c, n := utf8.DecodeRune(input[i:])
		if !unspaced(c) {
			i += n
			continue
		}
		j := i + n
		for j < len(input) {
			c, n := utf8.DecodeRune(input[j:])
			if !unspaced(c) {
				break
			}
			j += n
		}
		runs = append(runs, &analysis.Token{Term: input[i:j], Start: i, End: j, Type: analysis.AlphaNumeric})
		i = j
	}
	if len(runs) == 0 {
		return base
	}
	out := make(analysis.TokenStream, 0, len(base)+len(runs))
	bi := 0
	for _, run := range runs {
		for bi < len(base) && base[bi].Start < run.Start {
			if base[bi].End <= run.Start {
				out = append(out, base[bi])
			}
			bi++
		}
		for bi < len(base) && base[bi].Start < run.End { // covered by the run
			bi++
		}
		out = append(out, run)
	}
	out = append(out, base[bi:]...)
	for i, t := range out {
		t.Position = i + 1
	}
	return out
}

// unspaced reports a letter of a script written without spaces between
// words that Bleve's tokenizer leaves whole.
func unspaced(r rune) bool {
	return unicode.In(r, unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar)
}

// bigrammed reports a letter whose words the bigram filter splits: the
// unspaced scripts, and Hangul, whose words carry their particles (Lucene's
// CJK analyzer splits Hangul the same way; Bleve's leaves it whole).
func bigrammed(r rune) bool { return unspaced(r) || unicode.Is(unicode.Hangul, r) }

// bigramFilter replaces each token made of unspaced letters (and marks) by
// its overlapping character bigrams, byte offsets kept; a one-letter token
// stays as it is.
type bigramFilter struct{}

func (bigramFilter) Filter(in analysis.TokenStream) analysis.TokenStream {
	out := make(analysis.TokenStream, 0, len(in))
	pos := 1
	for _, t := range in {
		r, _ := utf8.DecodeRune(t.Term)
		if !bigrammed(r) || utf8.RuneCount(t.Term) < 3 {
			c := *t
			c.Position = pos
			pos++
			out = append(out, &c)
			continue
		}
		// Offsets of each rune start in t.Term; Term may differ in length
		// from the source text only by lower-casing, which these scripts
		// do not have, so Start + offset is the source offset.
		var starts []int
		for i := range string(t.Term) {
			starts = append(starts, i)
		}
		starts = append(starts, len(t.Term))
		for i := 0; i+2 < len(starts); i++ {
			out = append(out, &analysis.Token{
				Term:     append([]byte(nil), t.Term[starts[i]:starts[i+2]]...),
				Start:    t.Start + starts[i],
				End:      t.Start + starts[i+2],
				Position: pos,
				Type:     analysis.Double,
			})
			pos++
		}
	}
	return out
}

// MinConfidence is the least confidence (whatlanggo's: how far the best
// trigram profile is ahead of the second) at which Detect names a language
// where the script leaves a choice. whatlanggo's own "reliable" mark leaves
// a third to a half of the shared sets' questions undecided; at 0.1 about a
// twentieth are, and 1-16 % are named wrongly (TestDetectQueries).
const MinConfidence = 0.1

// MinLetters is the fewest letters from which Detect names a language
// where the script leaves a choice: below it the trigrams are too few ("a
// cat" reads as Romanian).
const MinLetters = 16

func letters(s string) int {
	n := 0
	for _, r := range s {
		if unicode.IsLetter(r) {
			n++
		}
	}
	return n
}

// DetectBytes is how much of a text Detect reads at most.
const DetectBytes = 1024

// Detect returns the ISO 639-1 code of the language text is written in, or
// "" when it cannot tell (see the package doc).
func Detect(text string) string {
	g := guess(text)
	return g.Code
}

// A Guess is what Detect found and how sure it is.
type Guess struct {
	Code string // as Detect returns it ("" when it cannot tell)
	// Latin is a text in Latin script, where the trigrams choose among
	// dozens of languages and short or technical English is often read
	// as Italian or Romanian (28 % of CACM's titles and abstracts are at
	// MinConfidence, 2 % at SureConfidence).
	Latin bool
	// Sure is a language the script decides, or a trigram choice at
	// SureConfidence or more.
	Sure bool
}

// SureConfidence is the confidence from which a Latin-script guess is Sure.
const SureConfidence = 0.5

// GuessText is Detect with how sure it is: where it is not, a caller that
// knows what most of its texts are in (an index, a folder) does better to
// take that.
func GuessText(text string) Guess { return guess(text) }

func guess(text string) Guess {
	if len(text) > DetectBytes {
		cut := DetectBytes
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	for _, r := range text {
		if unicode.In(r, unicode.Hiragana, unicode.Katakana) {
			return Guess{Code: "ja", Sure: true}
		}
	}
	info := whatlanggo.Detect(text)
	if info.Lang < 0 {
		return Guess{}
	}
	latin := info.Script == unicode.Latin
	if info.Script == unicode.Cyrillic && russianLetters(text) {
		return Guess{Code: "ru", Sure: true}
	}
	switch info.Script {
	case unicode.Latin, unicode.Cyrillic, unicode.Arabic, unicode.Devanagari, unicode.Hebrew, unicode.Ethiopic:
		if info.Confidence < MinConfidence || letters(text) < MinLetters {
			return Guess{Latin: latin}
		}
		return Guess{Code: info.Lang.Iso6391(), Latin: latin, Sure: !latin || info.Confidence >= SureConfidence}
	}
	return Guess{Code: info.Lang.Iso6391(), Sure: true}
}

// IsLatin reports a language written in Latin script (among those Detect
// names).
func IsLatin(code string) bool { return latinCodes[code] }

var latinCodes = func() map[string]bool {
	m := map[string]bool{}
	for _, l := range []whatlanggo.Lang{whatlanggo.Spa, whatlanggo.Eng, whatlanggo.Por, whatlanggo.Ind, whatlanggo.Fra,
		whatlanggo.Deu, whatlanggo.Jav, whatlanggo.Vie, whatlanggo.Ita, whatlanggo.Tur, whatlanggo.Pol, whatlanggo.Orm,
		whatlanggo.Ron, whatlanggo.Hau, whatlanggo.Hrv, whatlanggo.Nld, whatlanggo.Kur, whatlanggo.Yor, whatlanggo.Uzb,
		whatlanggo.Ibo, whatlanggo.Ceb, whatlanggo.Tgl, whatlanggo.Hun, whatlanggo.Azj, whatlanggo.Ces, whatlanggo.Mlg,
		whatlanggo.Nya, whatlanggo.Kin, whatlanggo.Zul, whatlanggo.Swe, whatlanggo.Som, whatlanggo.Ilo, whatlanggo.Uig,
		whatlanggo.Hat, whatlanggo.Aka, whatlanggo.Sna, whatlanggo.Afr, whatlanggo.Fin, whatlanggo.Run, whatlanggo.Tuk,
		whatlanggo.Dan, whatlanggo.Nob, whatlanggo.Nno, whatlanggo.Lit, whatlanggo.Slv, whatlanggo.Epo, whatlanggo.Lav,
		whatlanggo.Est} {
		if c := l.Iso6391(); c != "" {
			m[c] = true
		}
	}
	return m
}()

// russianLetters reports a Cyrillic text holding letters of Russian (ы, э,
// ъ) and none of the letters Russian lacks and its neighbours use
// (Ukrainian і ї є ґ, Belarusian ў і, Serbian and Macedonian ј љ њ ђ ћ ѓ ќ
// ѕ џ): the trigrams alone take a short Russian sentence for Macedonian or
// Bulgarian.
func russianLetters(text string) bool {
	ru := false
	for _, r := range strings.ToLower(text) {
		switch r {
		case 'ы', 'э', 'ъ':
			ru = true
		case 'і', 'ї', 'є', 'ґ', 'ў', 'ј', 'љ', 'њ', 'ђ', 'ћ', 'ѓ', 'ќ', 'ѕ', 'џ':
			return false
		}
	}
	return ru
}

// Parse gives the ISO 639-1 code of s: a code in any case, with or without a
// region ("en-US", "zh_Hant"), an ISO 639-3 code or an English name
// ("deu", "German"); Auto ("auto") and "" come back as they are.
func Parse(s string) (string, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" || t == Auto {
		return t, nil
	}
	if i := strings.IndexAny(t, "-_"); i > 0 {
		t = t[:i]
	}
	switch {
	case t == "nb" || t == "nn":
		return "no", nil
	case len(t) == 2:
		if known2[t] {
			return t, nil
		}
	case len(t) == 3:
		if l := whatlanggo.CodeToLang(t); l >= 0 {
			if c := l.Iso6391(); c != "" {
				return c, nil
			}
		}
	default:
		for l := whatlanggo.Lang(0); l.String() != ""; l++ {
			if strings.EqualFold(l.String(), t) {
				return l.Iso6391(), nil
			}
		}
	}
	return "", fmt.Errorf("lang: %q is not a language this package knows (give an ISO 639-1 code such as en, de, zh)", s)
}

// known2 is every two-letter code Parse accepts: whatlanggo's and Bleve's.
var known2 = func() map[string]bool {
	m := map[string]bool{}
	for l := whatlanggo.Lang(0); l.String() != ""; l++ {
		if c := l.Iso6391(); c != "" {
			m[c] = true
		}
	}
	for c := range bleveAnalyzers {
		if len(c) == 2 {
			m[c] = true
		}
	}
	for _, c := range []string{"bg", "ca", "cs", "el", "eu", "ga", "gl", "hy", "id", "lo", "ms", "sk", "sl", "vi"} {
		m[c] = true
	}
	return m
}()
