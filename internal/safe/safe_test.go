package safe

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
)

func TestCtx(t *testing.T) {
	if Ctx(nil) != context.Background() {
		t.Error("Ctx(nil) is not context.Background()")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if Ctx(ctx) != ctx {
		t.Error("Ctx changed a non-nil context")
	}
}

//go:noinline
func indexOutOfRange(s []int, i int) int { return s[i] }

func TestCallNamesThePanic(t *testing.T) {
	if err := Call(func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	plain := errors.New("plain")
	if err := Call(func() error { return plain }); err != plain {
		t.Fatalf("Call changed f's error: %v", err)
	}

	err := Call(func() error { indexOutOfRange(nil, 3); return nil })
	var p *PanicError
	var re runtime.Error
	if !errors.As(err, &p) || !errors.As(err, &re) {
		t.Fatalf("err = %#v, want a *PanicError unwrapping to a runtime.Error", err)
	}
	if !strings.Contains(p.Frame, "safe.indexOutOfRange (safe_test.go:") || !strings.Contains(err.Error(), "index out of range") {
		t.Errorf("error %q (frame %q) should give the panic and the function that panicked", err, p.Frame)
	}
	if !strings.Contains(string(p.Stack), "indexOutOfRange") {
		t.Errorf("stack does not show the panicking function:\n%s", p.Stack)
	}

	// Carried to another goroutine and panicked again there, it still
	// names where it began.
	done := make(chan error)
	go func() { done <- Call(func() error { panic("far away") }) }()
	first := <-done
	again := Call(func() error { Repanic(first); return nil })
	if again != first {
		t.Errorf("Repanic then Recover gave %v, want the first error %v", again, first)
	}
	if err := Call(func() error { Repanic(plain); Repanic(nil); return nil }); err != nil {
		t.Errorf("Repanic panicked on a plain error or nil: %v", err)
	}
}
