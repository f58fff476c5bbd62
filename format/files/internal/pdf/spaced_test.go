package pdf

import (
	"testing"

	"github.com/klippa-app/go-pdfium/structs"
)

// TestSpaced: a space goes between two characters of one line whose
// advance boxes are a word's gap apart, and nowhere else.
func TestSpaced(t *testing.T) {
	// Characters 10 wide on a line 10 high; x gives each one's left edge,
	// y its line's bottom.
	layout := func(x, y []float32) func(int) (structs.FPDF_FS_RECTF, bool) {
		return func(i int) (structs.FPDF_FS_RECTF, bool) {
			return structs.FPDF_FS_RECTF{Left: x[i], Right: x[i] + 10, Bottom: y[i], Top: y[i] + 10}, true
		}
	}
	for _, c := range []struct {
		name, text string
		x, y       []float32
		want       string
	}{
		{"letters touching", "ab", []float32{0, 10}, []float32{0, 0}, "ab"},
		{"kerned within a word", "ab", []float32{0, 10.5}, []float32{0, 0}, "ab"},
		{"a word's gap", "ab", []float32{0, 13}, []float32{0, 0}, "a b"},
		{"a space there already", "a b", []float32{0, 10, 13}, []float32{0, 0, 0}, "a b"},
		{"the next line", "a\nb", []float32{0, 10, 50}, []float32{0, 0, -12}, "a\nb"},
		{"a column far away", "ab", []float32{0, 100}, []float32{0, 0}, "ab"},
		{"right to left", "ab", []float32{20, 0}, []float32{0, 0}, "ab"},
		{"after punctuation", "year,and", []float32{0, 10, 20, 30, 40, 53, 63, 73}, []float32{0, 0, 0, 0, 0, 0, 0, 0}, "year, and"},
	} {
		if got := spaced(c.text, len([]rune(c.text)), layout(c.x, c.y)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	// Characters PDFium counts otherwise than the text's UTF-16 units: as given.
	if got := spaced("ab", 3, layout([]float32{0, 13, 26}, []float32{0, 0, 0})); got != "ab" {
		t.Errorf("count mismatch: %q", got)
	}
}
