package tokenizer

import "testing"

func loadMiniLMPure(t testing.TB) *Tokenizer {
	t.Helper()
	tk, err := LoadPure(miniLMPath(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tk.Close() })
	return tk
}

// TestPureReferenceVectors holds the pure-Go implementation to the
// committed Python vectors in every build (with cgo on, Load picks the
// native one).
func TestPureReferenceVectors(t *testing.T) {
	tk := loadMiniLMPure(t)
	if got := tk.Implementation(); got != "pure" {
		t.Fatalf("LoadPure gave the %s implementation", got)
	}
	checkVectors(t, tk)
}
