package engine

import (
	"context"

	"github.com/anna-search/anna/internal/fusion"
)

// PanicInLexical makes e's BM25 list panic with v — on the goroutine a
// hybrid search starts for it — until restore is called. For tests of the
// recover at the top of that goroutine; call it while no search runs.
func PanicInLexical(e *Engine, v any) (restore func()) {
	old := e.be
	e.be = panickyLexical{old, v}
	return func() { e.be = old }
}

type panickyLexical struct {
	backend
	v any
}

func (p panickyLexical) lexical(context.Context, string, int, Filter) ([]fusion.Hit, error) {
	panic(p.v)
}
