package engine

import (
	"context"
	"fmt"
)

// stateCaller prefixes the keys of SetState and State in anna.db's state,
// so a caller's records never meet the engine's own (model.*, search.*).
const stateCaller = "caller."

// SetState keeps val, a caller's own small record, under key in anna.db
// beside the documents (nil or empty deletes it): package ingest
// remembers there the files of a folder that failed to read. The engine
// never reads these values; they survive restarts, Check, Repair and
// Reindex. Each SetState is one transaction of its own, not part of an
// Add or Apply: a caller whose record must agree with documents orders
// its writes so that a crash between the two leaves it conservative (see
// ingest's doc). A read-only engine refuses with ErrReadOnly, and an
// engine writing through another process (Options.WriteThrough) with an
// error wrapping ErrLocked.
func (e *Engine) SetState(key string, val []byte) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	if key == "" {
		return optErr("SetState key", `""`, "must not be empty")
	}
	if e.opts.ReadOnly {
		return ErrReadOnly
	}
	if len(val) == 0 {
		val = nil
	}
	if e.via != nil {
		in, err := e.viaInner("keep a record")
		if err != nil {
			return err
		}
		return in.SetState(key, val)
	}
	if err := e.store.SetState(stateCaller+key, val); err != nil {
		return fmt.Errorf("engine: recording %s: %w", key, err)
	}
	return nil
}

// State returns the record SetState kept under key, nil if none. An
// engine reading through another process cannot: its error wraps
// ErrLocked.
func (e *Engine) State(key string) ([]byte, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if key == "" {
		return nil, optErr("State key", `""`, "must not be empty")
	}
	if e.via != nil {
		in, err := e.viaInner("read a record")
		if err != nil {
			return nil, err
		}
		return in.State(key)
	}
	v, err := e.store.State(stateCaller + key)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return v, nil
}

// viaInner is the engine a via engine's state calls go to: the directory
// opened directly once the writing process has closed it; while that
// process has it, the error of writerOnly.
func (e *Engine) viaInner(what string) (*Engine, error) {
	_, in, err := e.via.target(context.Background())
	if err != nil {
		return nil, err
	}
	if in == nil {
		err = e.via.writerOnly(what)
		if err == nil {
			err = fmt.Errorf("engine: %s: %w", what, ErrLocked)
		}
		return nil, err
	}
	return in, nil
}
