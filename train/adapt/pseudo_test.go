package adapt

import (
	"testing"

	"github.com/anna-search/anna/engine"
)

// TestPseudoQueryEveryScript: extractive queries come from every script's
// first sentence, those written without spaces included.
func TestPseudoQueryEveryScript(t *testing.T) {
	for text, want := range map[string]string{
		"The cats were running through the gardens. The dogs slept.": "The cats were running through the gardens",
		"北京是中华人民共和国的首都，也是全国的政治和文化中心。长城很长。":                           "北京是中华人民共和国的首都，也是全国的政治和文化中心",
		"東京は日本の首都であり、多くの人々が住んでいる。富士山は高い。":                            "東京は日本の首都であり、多くの人々が住んでいる",
		"القاهرة هي عاصمة مصر وأكبر مدنها. النيل طويل":               "القاهرة هي عاصمة مصر وأكبر مدنها",
		"短い。": "",
	} {
		if got := PseudoQuery(engine.Document{Text: text}); got != want {
			t.Errorf("PseudoQuery(%q) = %q, want %q", text, got, want)
		}
	}
}
