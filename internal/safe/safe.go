// Package safe holds the two guards every library entry point uses: a nil
// context.Context is context.Background() (Ctx), and a panic — in a
// goroutine the library started or in code a caller plugged in (an
// Encoder, a Reranker) — comes back to the caller as an error (Recover,
// Call) instead of ending the process.
//
// A goroutine that panics cannot be recovered by its parent: the runtime
// ends the process. So every goroutine a library package starts runs its
// work through Call (or defers Recover) at its top and hands the error to
// the goroutine that waits for it.
package safe

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
)

// Ctx returns ctx, or context.Background() when ctx is nil. Exported
// functions that take a context start with ctx = safe.Ctx(ctx).
func Ctx(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// PanicError is a recovered panic: its value, the function that panicked
// (the first frame of the stack below the runtime's) and the whole stack.
// It unwraps to the value when that is an error.
type PanicError struct {
	Value any
	Frame string // "pkg.Func (file.go:12)"; "" when unknown
	Stack []byte // the panicking goroutine's stack, as debug.Stack prints it
}

func (p *PanicError) Error() string {
	if p.Frame == "" {
		return fmt.Sprintf("panic: %v", p.Value)
	}
	return fmt.Sprintf("panic: %v (in %s)", p.Value, p.Frame)
}

// Unwrap returns the panic value when it is an error (a runtime.Error, or
// an error a caller panicked with).
func (p *PanicError) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

// Recover, deferred directly (defer safe.Recover(&err)), turns a panic of
// the function that defers it into a *PanicError in *errp. A value that is
// already a *PanicError (a panic carried over from another goroutine, see
// Repanic) is kept as it is, so it still names the first frame.
func Recover(errp *error) {
	if v := recover(); v != nil {
		*errp = toError(v)
	}
}

// Call runs f and returns its error, or the *PanicError it panicked with.
func Call(f func() error) (err error) {
	defer Recover(&err)
	return f()
}

// Repanic panics with err on the calling goroutine when err is a
// *PanicError, so that a panic caught in a worker goroutine travels to
// the goroutine that waited for it (and from there to a Recover) rather
// than ending the process. Other errors, and nil, are ignored.
func Repanic(err error) {
	if p, ok := err.(*PanicError); ok {
		panic(p)
	}
}

// toError wraps a recovered value. It runs inside the deferred call, on
// top of the panicking stack, so the frames below runtime.gopanic are the
// ones that panicked.
func toError(v any) error {
	if p, ok := v.(*PanicError); ok {
		return p
	}
	return &PanicError{Value: v, Frame: panicFrame(), Stack: debug.Stack()}
}

// panicFrame names the first frame below the runtime's panic machinery
// (runtime.gopanic, and runtime.panicmem/sigpanic or the like for a
// runtime error).
func panicFrame() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(1, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	inPanic := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			inPanic = true
		case inPanic && !strings.HasPrefix(f.Function, "runtime."):
			return fmt.Sprintf("%s (%s:%d)", f.Function, filepath.Base(f.File), f.Line)
		}
		if !more {
			return ""
		}
	}
}
