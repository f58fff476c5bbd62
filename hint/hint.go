// Package hint is the one shape of the advice an error carries: what the
// user can do about it, as Actions of a known Kind with their arguments.
//
// An error's text says the same in words and reads well alone (a Go
// program shows err.Error()); front ends render the Actions their own way:
// annactl as the command that does it ("run: annactl models install
// bge-small-en-v1.5"), the server as its JSON error's "hint". Library
// strings never name a command of annactl (a test scans them).
//
// Of finds the Actions of an error through any wrapping (fmt.Errorf's %w,
// errors.Join): the first error in the chain with a method
// Hints() []Action, as *Error and engine's typed errors (DamageError,
// RecoveryError, ModelMismatchError, ModelNotFoundError) have.
package hint

import (
	"errors"
	"fmt"
)

// Kind names an action; its string is the machine-readable form (the
// server's JSON).
type Kind string

// The actions, and the fields of Action each reads.
const (
	// InstallModel installs a model of the catalogue (model/catalog)
	// by name: Model ("" when the user picks one).
	InstallModel Kind = "install-model"
	// ListModels lists the catalogue's and the installed models.
	ListModels Kind = "list-models"
	// ImportModel converts a checkpoint into a model directory;
	// Option and Value name an import option it needs ("task",
	// "rerank"; "quantize", "int8"), if any.
	ImportModel Kind = "import-model"
	// AddModel installs a model directory under $ANNA_HOME/models:
	// Model, its directory ("" when the user picks one).
	AddModel Kind = "add-model"
	// Reindex moves the index Index to the model Model ("" when the
	// user picks one), re-embedding its documents; with Option
	// "chunking", it keeps the model and changes how documents are split
	// into passages (Value: the chunking wanted, engine.Chunking's form).
	Reindex Kind = "reindex"
	// Repair opens the index Index for writing, which replays what its
	// derived indexes missed, checks it and salvages every whole record
	// into a new store.
	Repair Kind = "repair"
	// AddDocuments adds documents to the index Index (creating it).
	AddDocuments Kind = "add-documents"
	// BuildReranker trains anna's cross-encoder and installs it.
	BuildReranker Kind = "build-reranker"
	// MineNegatives mines hard negatives into a training file.
	MineNegatives Kind = "mine-negatives"
	// SetOption sets the option Option (named as in Go:
	// "server.Limits.MaxTextBytes") to Value ("" for a value the user
	// picks, "unset" to leave it unset).
	SetOption Kind = "set-option"
)

// Action is one thing the user can do about an error.
type Action struct {
	Kind   Kind   `json:"kind"`
	Index  string `json:"index,omitempty"`  // the engine directory it acts on
	Model  string `json:"model,omitempty"`  // a model's name or directory
	Option string `json:"option,omitempty"` // an option's name
	Value  string `json:"value,omitempty"`  // the option's value
}

// String says the action in words, without naming a program.
func (a Action) String() string {
	or := func(s, alt string) string {
		if s == "" {
			return alt
		}
		return s
	}
	switch a.Kind {
	case InstallModel:
		return "install the catalogue's model " + or(a.Model, "you need")
	case ListModels:
		return "list the catalogue's and the installed models"
	case ImportModel:
		if a.Option != "" {
			return fmt.Sprintf("convert a checkpoint into a model directory (%s %s)", a.Option, a.Value)
		}
		return "convert a checkpoint into a model directory"
	case AddModel:
		return "install the model directory " + or(a.Model, "that holds it")
	case Reindex:
		if a.Option == "chunking" {
			return fmt.Sprintf("reindex %s with the chunking %s", or(a.Index, "the index"), or(a.Value, "you choose"))
		}
		return fmt.Sprintf("reindex %s with the model %s", or(a.Index, "the index"), or(a.Model, "you choose"))
	case Repair:
		return "repair " + or(a.Index, "the index")
	case AddDocuments:
		return "add documents to " + or(a.Index, "the index")
	case BuildReranker:
		return "build anna's reranker"
	case MineNegatives:
		return "mine hard negatives"
	case SetOption:
		switch a.Value {
		case "":
			return "set " + a.Option
		case "unset":
			return "leave " + a.Option + " unset"
		}
		return "set " + a.Option + " to " + a.Value
	}
	return string(a.Kind)
}

// Error is an error with the actions that address it. Its text is Err's.
type Error struct {
	Err     error
	Actions []Action
}

func (e *Error) Error() string   { return e.Err.Error() }
func (e *Error) Unwrap() error   { return e.Err }
func (e *Error) Hints() []Action { return e.Actions }

// Wrap returns err with actions attached (nil for a nil err, err itself
// for no actions).
func Wrap(err error, actions ...Action) error {
	if err == nil || len(actions) == 0 {
		return err
	}
	return &Error{Err: err, Actions: actions}
}

// Errorf is fmt.Errorf (%w wraps as there) with actions attached.
func Errorf(a Action, format string, args ...any) error {
	return &Error{Err: fmt.Errorf(format, args...), Actions: []Action{a}}
}

// Of returns the actions err carries: those of the first error in its
// chain with a method Hints() []Action, nil when none has one. The
// first action is the one to try first; the others are alternatives.
func Of(err error) []Action {
	var h interface{ Hints() []Action }
	if errors.As(err, &h) {
		return h.Hints()
	}
	return nil
}
