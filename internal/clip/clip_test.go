package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	if got := Quote("abc"); got != `"abc"` {
		t.Errorf("Quote(abc) = %s", got)
	}
	long := strings.Repeat("é", 20000) // 40,000 bytes
	for _, got := range []string{Quote(long), String(long)} {
		if len(got) > Max+40 {
			t.Errorf("%d bytes for a 40,000-byte input", len(got))
		}
		if !utf8.ValidString(got) {
			t.Errorf("cut inside a rune: %q", got)
		}
		if !strings.Contains(got, "(40000 bytes)") {
			t.Errorf("%s does not give the length", got)
		}
	}
	if got := String("short"); got != "short" {
		t.Errorf("String(short) = %s", got)
	}
	if got := Bytes(long, 100); len(got) > 100 || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Errorf("Bytes: %q", got)
	}
	if got := Bytes("ok", 100); got != "ok" {
		t.Errorf("Bytes(ok) = %q", got)
	}
}
