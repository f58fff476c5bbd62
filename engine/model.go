package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/hint"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/installed"
	"github.com/anna-search/anna/internal/safe"
	"github.com/anna-search/anna/model"
)

// ErrModelNotFound is wrapped by ModelNotFoundError.
var ErrModelNotFound = errors.New("model not found")

// ModelNotFoundError reports that a directory's model is needed (to embed a
// query or documents) and can be found neither where it was recorded nor
// among the installed models by its fingerprint. Lexical searches and Stats
// do not need the model. It wraps ErrModelNotFound. Its hints: install a
// copy of the model, or reindex Dir with another.
type ModelNotFoundError struct {
	Dir       string // the engine directory ("" from FindModel)
	Model     Model  // the recorded model
	Why       string // why its recorded directory does not serve
	ModelsDir string // where installed models were looked for
}

func (m *ModelNotFoundError) Error() string {
	where := "engine: "
	if m.Dir != "" {
		where = "engine: " + m.Dir + ": "
	}
	return fmt.Sprintf("%sits model, %s, cannot be found: %s, and no model installed under %s has fingerprint %s. Lexical searches and stats work without it; to embed (dense, hybrid and rerank searches, adding documents) install a copy of it again under %[4]s, or move the index to another model (Reindex)",
		where, m.Model.Label(), m.Why, m.ModelsDir, shortFP(m.Model.Fingerprint))
}

// Hints is what to do about it: install a copy of the model, or reindex
// Dir with another (hint.Of).
func (m *ModelNotFoundError) Hints() []hint.Action {
	return []hint.Action{{Kind: hint.AddModel}, {Kind: hint.Reindex, Index: m.Dir}}
}

func (m *ModelNotFoundError) Unwrap() error { return ErrModelNotFound }

// Label names the model for people: its manifest name and short
// fingerprint (12 hex digits), "all-MiniLM-L6-v2 (5ac62f6b6ec2)", or the
// short fingerprint alone when the name is unknown.
func (m Model) Label() string { return modelLabel(m.Name, m.Fingerprint) }

func modelLabel(name, fp string) string {
	if name == "" {
		return shortFP(fp)
	}
	return name + " (" + shortFP(fp) + ")"
}

// shortFP is a fingerprint's first 12 characters, as shown everywhere.
func shortFP(fp string) string { return fp[:min(12, len(fp))] }

// FindModel returns the directory that holds m, a model recorded by an
// engine directory (RecordedModel, Engine.Model): m.Dir (when "", as
// directories indexed with the default model before its directory was
// recorded have it: the default model's directory, in either form) while
// its manifest has m's fingerprint, else an installed model under
// $ANNA_HOME/models with that fingerprint (see installed.Find), else a
// *ModelNotFoundError that names the model and how to get it back. It
// reads manifests only.
func FindModel(m Model) (string, error) {
	if m.Fingerprint == "" {
		return "", fmt.Errorf("engine: FindModel: the model has no fingerprint (a directory that holds no documents is bound to none)")
	}
	if encoder.IsRemote(m.Dir) {
		return m.Dir, nil // another server's: its fingerprint is checked once it answers
	}
	dir := m.Dir
	if dir == "" {
		dir = defaultDir(m.Fingerprint)
	}
	man, err := model.LoadManifest(dir)
	var why string
	switch {
	case err == nil && man.Fingerprint == m.Fingerprint:
		return dir, nil
	case err == nil:
		why = fmt.Sprintf("%s holds another model now, %s", dir, modelLabel(man.Name, man.Fingerprint))
	case errors.Is(err, fs.ErrNotExist):
		why = fmt.Sprintf("%s, where it was, is gone", dir)
		if _, serr := os.Stat(dir); serr == nil {
			why = fmt.Sprintf("%s, where it was, holds no model now", dir)
		}
	default:
		why = err.Error()
	}
	models := home.ModelsDir()
	found, _, err := installed.Find(models, m.Fingerprint)
	if err != nil {
		return "", fmt.Errorf("engine: looking for model %s: %w", m.Label(), err)
	}
	if found != "" {
		return found, nil
	}
	return "", &ModelNotFoundError{Model: m, Why: why, ModelsDir: models}
}

// LoadEncoder returns the encoder the engine embeds with, loading the
// engine's model first if it is not loaded yet (see Open: a directory
// bound to a model and opened without Options.Model or Options.Encoder
// loads it when it first needs it). A model that cannot be found is a
// *ModelNotFoundError.
func (t Teacher) LoadEncoder(ctx context.Context) (_ encoder.Encoder, err error) {
	e := t.e
	ctx = safe.Ctx(ctx)
	defer safe.Recover(&err)
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if err := e.ensureEncoder(ctx); err != nil {
		return nil, err
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.cur.enc, nil
}

// ensureEncoder loads the engine's model unless an encoder is already set.
// Once set, e.cur.enc is never nil again (Reindex replaces it), so callers may
// take their (encoder, model, index) snapshot after it returns.
func (e *Engine) ensureEncoder(ctx context.Context) error {
	e.mu.RLock()
	have := e.cur.enc != nil
	e.mu.RUnlock()
	if have {
		return nil
	}
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
	e.mu.RLock()
	enc, m := e.cur.enc, e.cur.model
	e.mu.RUnlock()
	if enc != nil {
		return nil
	}
	dir, err := FindModel(m)
	if nf, ok := err.(*ModelNotFoundError); ok {
		nf.Dir = e.dir
	}
	if err != nil {
		return err
	}
	loaded, closer, err := openEncoder(ctx, dir)
	if err != nil {
		return fmt.Errorf("engine: loading the model %s from %s: %w", m.Label(), dir, err)
	}
	name := modelName(loaded, "", "")
	if loaded.Fingerprint() != m.Fingerprint {
		closer()
		return &ModelMismatchError{Dir: e.dir, Index: m.Fingerprint, IndexName: m.Name, Model: loaded.Fingerprint(), ModelName: name}
	}
	enc = loaded
	if e.opts.EmbeddingCache != "" {
		if enc, err = encoder.NewCache(loaded, e.opts.EmbeddingCache); err != nil {
			closer()
			return fmt.Errorf("engine: %w", err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closers = append(e.closers, closer)
	if e.cur.enc == nil && e.cur.model.Fingerprint == m.Fingerprint {
		e.cur.enc = enc
		if e.cur.model.Name == "" {
			e.cur.model.Name = name
		}
	}
	return nil
}

// openEncoder loads the model spec names: a model directory, or a model
// another server runs (encoder.IsRemote: "URL#NAME", through its
// OpenAI-compatible /v1/embeddings). close releases it.
func openEncoder(ctx context.Context, spec string) (enc encoder.Encoder, close func() error, err error) {
	c, err := encoder.Open(ctx, spec, encoder.Options{})
	if err != nil {
		return nil, nil, err
	}
	return c, c.Close, nil
}

// keepModel installs m's directory under $ANNA_HOME/models by content
// (installed.Keep, as `annactl models add DIR` does) unless a model of its
// fingerprint is installed there already, so that FindModel finds it by
// fingerprint once m.Dir has moved. Nothing is kept for a model with no
// directory holding it: the default model (installed already), or an
// Encoder given with a directory that does not hold its fingerprint.
func (e *Engine) keepModel(ctx context.Context, m Model) error {
	if m.Dir == "" {
		return nil
	}
	if man, err := model.LoadManifest(m.Dir); err != nil || man.Fingerprint != m.Fingerprint {
		return nil
	}
	dir, _, copied, err := installed.Keep(ctx, m.Dir, home.ModelsDir())
	if err != nil {
		return fmt.Errorf("engine: keeping model %s under %s (Options.KeepModel): %w", m.Label(), home.ModelsDir(), err)
	}
	if copied {
		e.logf("model %s: kept a copy of %s as %s, where the index finds it by fingerprint if %s moves", m.Label(), m.Dir, dir, m.Dir)
	}
	return nil
}

// modelName is the manifest name of the model enc embeds with: from the
// encoder (through caches) when it says, else from dir's manifest when that
// holds fp; "" when neither does (an Encoder given alone).
func modelName(enc encoder.Encoder, dir, fp string) string {
	for enc != nil {
		if m, ok := enc.(interface{ Manifest() *model.Manifest }); ok {
			return m.Manifest().Name
		}
		u, ok := enc.(interface{ Unwrap() encoder.Encoder })
		if !ok {
			break
		}
		enc = u.Unwrap()
	}
	return manifestName(dir, fp)
}

// manifestName is the name in dir's manifest (the default model's when dir
// is "") when it holds fingerprint fp, else "".
func manifestName(dir, fp string) string {
	if dir == "" {
		dir = defaultDir(fp)
	}
	if man, err := model.LoadManifest(dir); err == nil && man.Fingerprint == fp {
		return man.Name
	}
	return ""
}

// defaultDir is the directory of the default model's form with fingerprint
// fp — the form that embeds by default (home.DefaultEmbedModel), or the
// float32 one that was the default before — for a directory that recorded
// the default model without its directory; the first when neither has it.
func defaultDir(fp string) string {
	for _, d := range []string{home.DefaultEmbedModel(), home.DefaultModel()} {
		if man, err := model.LoadManifest(d); err == nil && man.Fingerprint == fp {
			return d
		}
	}
	return home.DefaultEmbedModel()
}
