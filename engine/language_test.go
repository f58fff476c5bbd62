package engine

import (
	"context"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/model"
)

// noiseEncoder is a model that knows none of the texts it is given: each
// text's vector is random (seeded by the text), so its dense list is noise.
// Its manifest says which languages it was trained on.
type noiseEncoder struct {
	langs []string
}

func (n noiseEncoder) Dim() int            { return 16 }
func (n noiseEncoder) Fingerprint() string { return "noise" }
func (n noiseEncoder) Manifest() *model.Manifest {
	return &model.Manifest{Name: "noise", Fingerprint: "noise", Dim: 16, Languages: n.langs}
}
func (n noiseEncoder) EmbedDocuments(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		h := fnv.New64a()
		h.Write([]byte(t))
		r := rand.New(rand.NewPCG(h.Sum64(), 1))
		v := make([]float32, 16)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		out[i] = normalized(v)
	}
	return out, nil
}
func (n noiseEncoder) EmbedQueries(ctx context.Context, q []string, _ encoder.Prompt) ([][]float32, error) {
	return n.EmbedDocuments(ctx, q)
}

func normalized(v []float32) []float32 {
	var s float32
	for _, x := range v {
		s += x * x
	}
	s = 1 / sqrt32(s)
	for i := range v {
		v[i] *= s
	}
	return v
}

func sqrt32(x float32) float32 {
	z := x
	for range 20 {
		z = (z + x/z) / 2
	}
	return z
}

var germanDocs = []Document{
	{ID: "katzen", Text: "Die Katzen liefen durch die Gärten des alten Hauses, während die Hunde vor der Tür schliefen."},
	{ID: "bahn", Text: "Die Deutsche Bahn betreibt das größte Schienennetz Europas und befördert täglich Millionen Fahrgäste."},
	{ID: "rhein", Text: "Der Rhein fließt von den Alpen durch Deutschland und die Niederlande bis in die Nordsee."},
	{ID: "bier", Text: "Das Reinheitsgebot von 1516 schrieb vor, dass Bier nur aus Gerste, Hopfen und Wasser gebraut werden darf."},
	{ID: "mauer", Text: "Die Berliner Mauer teilte die Stadt von 1961 bis 1989 in einen östlichen und einen westlichen Teil."},
	{ID: "goethe", Text: "Johann Wolfgang von Goethe schrieb den Faust, eines der bekanntesten Werke der deutschen Literatur."},
	{ID: "alpen", Text: "Die Zugspitze ist mit knapp dreitausend Metern der höchste Berg Deutschlands und liegt in den Alpen."},
	{ID: "auto", Text: "Carl Benz baute im Jahr 1885 das erste praktisch verwendbare Automobil mit Verbrennungsmotor."},
}

var germanQueries = map[string]string{
	"Wann fiel die Berliner Mauer?":              "mauer",
	"Wer schrieb den Faust?":                     "goethe",
	"Wo fließt der Rhein in die Nordsee?":        "rhein",
	"Woraus darf Bier gebraut werden?":           "bier",
	"Welcher Berg ist der höchste Deutschlands?": "alpen",
	"Wer baute das erste Automobil?":             "auto",
}

// TestHybridUselessList: over German documents, a model trained on English
// alone (its dense list noise here) is kept out of hybrid search's way:
// hybrid ranks as BM25 does. The same noise from a model said to know every
// language is fused by RRF and moves the ranking, so the rule is what keeps
// it out.
func TestHybridUselessList(t *testing.T) {
	ctx := context.Background()
	order := func(langs []string) map[string][]string {
		e, err := Open(ctx, t.TempDir(), Options{Encoder: noiseEncoder{langs}})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if _, err := e.Add(ctx, germanDocs); err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for q := range germanQueries {
			for _, mode := range []Mode{ModeLexical, ModeHybrid} {
				res, err := e.Search(ctx, q, SearchOptions{Mode: mode, K: len(germanDocs)})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range res {
					out[string(mode)+" "+q] = append(out[string(mode)+" "+q], r.ID)
				}
			}
		}
		return out
	}
	english := order([]string{"en"})
	for q, want := range germanQueries {
		lex, hyb := english["lexical "+q], english["hybrid "+q]
		if len(lex) == 0 || lex[0] != want {
			t.Fatalf("%q: BM25 ranks %v, want %s first", q, lex, want)
		}
		if !slices.Equal(hyb[:len(lex)], lex) {
			t.Errorf("%q: hybrid with an English model over German %v, BM25 %v", q, hyb, lex)
		}
		if len(hyb) != len(germanDocs) {
			t.Errorf("%q: hybrid gave %d results, want %d (the dense list's documents after BM25's)", q, len(hyb), len(germanDocs))
		}
	}
	every := order([]string{"*"})
	moved := 0
	for q := range germanQueries {
		if !slices.Equal(every["hybrid "+q][:len(every["lexical "+q])], every["lexical "+q]) {
			moved++
		}
	}
	if moved == 0 {
		t.Error("a noise list fused at full weight moved no ranking: the test shows nothing")
	}
}

// TestCrossLingualQueryWeight: a Chinese question over English documents
// gives the BM25 list (which can match only its names and numbers) a small
// weight; an English one, full weight.
func TestCrossLingualQueryWeight(t *testing.T) {
	ctx := context.Background()
	e, err := Open(ctx, t.TempDir(), Options{Encoder: noiseEncoder{[]string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Add(ctx, []Document{
		{ID: "a", Text: "The Denver Broncos won Super Bowl 50 against the Carolina Panthers in February 2016."},
		{ID: "b", Text: "The cats were running through the gardens of the old house while the dogs slept."},
	}); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string][2]float64{
		"Who won Super Bowl 50?": {1, 1},
		"丹佛野马队 Denver 在超级碗 50 中击败了哪支球队？": {0, 0.2},
	} {
		w, err := e.lexicalWeight(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if w < want[0] || w > want[1] {
			t.Errorf("lexical weight of %q = %.3f, want %.2f..%.2f", q, w, want[0], want[1])
		}
		res, err := e.Search(ctx, q, SearchOptions{Mode: ModeHybrid, K: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res[0].Explain {
			if c.List == "lexical" && want[1] < 1 && c.Fused > 0.2/61 {
				t.Errorf("%q: the BM25 list added %g to the top result", q, c.Fused)
			}
		}
	}
}

// TestSnippetsEveryScript: snippets of text without spaces (Chinese,
// Japanese, Thai) and right-to-left (Arabic) are whole characters, no
// longer than asked for plus a word (a character, where words have no
// spaces between them), and highlight the query's words as the document's
// language reads them.
func TestSnippetsEveryScript(t *testing.T) {
	ctx := context.Background()
	e, err := Open(ctx, t.TempDir(), Options{Encoder: noiseEncoder{[]string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	long := func(s string, n int) string {
		out := ""
		for range n {
			out += s
		}
		return out
	}
	docs := []Document{
		{ID: "zh", Text: long("北京是中华人民共和国的首都，也是全国的政治和文化中心。", 6) + "长城是中国古代的军事防御工程，全长两万多公里。" + long("上海是中国最大的经济中心城市之一。", 6)},
		{ID: "ja", Text: long("東京は日本の首都であり、多くの人々が住んでいる。", 6) + "富士山は日本で最も高い山として知られている。" + long("大阪は食べ物で有名な都市である。", 6)},
		{ID: "ar", Text: long("القاهرة هي عاصمة مصر وأكبر مدنها من حيث عدد السكان. ", 5) + "نهر النيل هو أطول نهر في العالم ويمر عبر عدة دول أفريقية. " + long("الإسكندرية مدينة ساحلية على البحر المتوسط. ", 5)},
		{ID: "th", Language: "th", Text: long("กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย ", 6) + "แม่น้ำเจ้าพระยาไหลผ่านกรุงเทพ " + long("เชียงใหม่เป็นเมืองทางภาคเหนือ ", 6)},
	}
	if _, err := e.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for id, c := range map[string]struct{ query, want string }{
		"zh": {"长城有多长", "长城"},
		"ja": {"富士山の高さ", "富士"},
		"ar": {"ما هو أطول نهر", "نهر"},
		"th": {"แม่น้ำเจ้าพระยา", "แม"}, // Thai is read in character pairs
	} {
		res, err := e.Search(ctx, c.query, SearchOptions{Mode: ModeLexical, K: 1, Snippets: true, SnippetSize: 60})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) == 0 || res[0].ID != id || res[0].Snippet == nil {
			t.Fatalf("%s: %q found %v", id, c.query, res)
		}
		s := res[0].Snippet
		if !utf8.ValidString(s.Text) || s.Text != res[0].Text[s.Start:s.End] {
			t.Errorf("%s: snippet %q is not whole characters of the text", id, s.Text)
		}
		if len(s.Text) > 60+2*maxWordBytes {
			t.Errorf("%s: snippet of %d bytes for 60 asked: %q", id, len(s.Text), s.Text)
		}
		var hl []string
		for _, h := range s.Highlights {
			if h.Start < s.Start || h.End > s.End || !utf8.ValidString(res[0].Text[h.Start:h.End]) {
				t.Fatalf("%s: highlight %v outside the snippet %d..%d or not whole characters", id, h, s.Start, s.End)
			}
			hl = append(hl, res[0].Text[h.Start:h.End])
		}
		joined := strings.Join(hl, "|")
		if !strings.Contains(joined, c.want) && !strings.Contains(c.want, hl0(hl)) {
			t.Errorf("%s: snippet %q highlights %q, want %q among them", id, s.Text, hl, c.want)
		}
	}
}

// maxWordBytes is snippet's bound on extending a fragment to a word end.
const maxWordBytes = 100

func hl0(h []string) string {
	if len(h) == 0 {
		return "\x00none"
	}
	return h[0]
}
