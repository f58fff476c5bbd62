package mining

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// A teacher that panics — on a worker goroutine of Run — fails the run
// with an error naming the panic instead of ending the process.
func TestRunPanicIsAnError(t *testing.T) {
	c, pairs := synth(t, 200, 20, 1)
	opt := DefaultOptions()
	opt.Workers = 3
	boom := funcTeacher{"boom", func(q, d string) float64 { panic("teacher boom") }}
	_, _, err := mine(t, c, boom, pairs, opt)
	if err == nil || !strings.Contains(err.Error(), "panic: teacher boom") {
		t.Fatalf("err = %v, want the teacher's panic", err)
	}
}

// A nil context is context.Background() for OpenPairs and Run.
func TestRunNilContext(t *testing.T) {
	var noCtx context.Context
	c, pairs := synth(t, 200, 20, 1)
	m, err := New(c, overlapTeacher, c, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	src, err := OpenPairs(noCtx, pairs, PromptDefaults{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	st, err := m.Run(noCtx, src, filepath.Join(t.TempDir(), "mined.jsonl"))
	if err != nil || st.Units != 20 {
		t.Fatalf("Run with a nil context: %v units, %v; want 20 units", st, err)
	}
}
