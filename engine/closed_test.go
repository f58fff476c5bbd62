package engine_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/anna-search/anna/engine"
)

// TestNilAndClosedEngine: issue 59's seventh finding. Every exported method
// of a nil *Engine and of a closed one, called with zero arguments (a
// background context), neither panics nor fails with anything but
// ErrClosed: the closed check comes before the arguments are looked at
// (Reindex after Close reported a missing option; (*Engine)(nil).Close()
// panicked). Close itself returns nil on both. The methods are found by
// reflection, so one added later is checked too, and so are the methods
// of the engine's Teacher.
func TestNilAndClosedEngine(t *testing.T) {
	closed := openT(t, t.TempDir(), "fp-a")
	addN(t, closed, 0, 3)
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	ctxType := reflect.TypeFor[context.Context]()
	errType := reflect.TypeFor[error]()
	for name, e := range map[string]*engine.Engine{"nil": nil, "closed": closed} {
		for prefix, v := range map[string]reflect.Value{"": reflect.ValueOf(e), "Teacher().": reflect.ValueOf(e.Teacher())} {
			checkMethods(t, name, prefix, v, ctxType, errType)
		}
	}
}

// checkMethods calls every exported method of v with zero arguments and
// checks that it neither panics nor fails with anything but ErrClosed.
func checkMethods(t *testing.T, name, prefix string, v reflect.Value, ctxType, errType reflect.Type) {
	t.Helper()
	for i := range v.NumMethod() {
		m := v.Type().Method(i)
		mt := v.Method(i).Type()
		args := make([]reflect.Value, 0, mt.NumIn())
		for j := range mt.NumIn() {
			in := mt.In(j)
			if mt.IsVariadic() && j == mt.NumIn()-1 {
				break
			}
			if in == ctxType {
				args = append(args, reflect.ValueOf(context.Background()))
			} else {
				args = append(args, reflect.Zero(in))
			}
		}
		var out []reflect.Value
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s engine: %s%s panicked: %v", name, prefix, m.Name, p)
				}
			}()
			out = v.Method(i).Call(args)
		}()
		for _, o := range out {
			if o.Type() != errType {
				continue
			}
			err, _ := o.Interface().(error)
			switch {
			case m.Name == "Close" && err != nil:
				t.Errorf("%s engine: Close: %v, want nil", name, err)
			case m.Name != "Close" && !errors.Is(err, engine.ErrClosed):
				t.Errorf("%s engine: %s%s: %v, want ErrClosed", name, prefix, m.Name, err)
			}
		}
	}
}
