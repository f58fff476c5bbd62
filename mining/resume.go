package mining

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/anna-search/anna/hint"
	"io/fs"
	"os"
	"time"

	"github.com/anna-search/anna/internal/atomicfile"
)

// checkpoint is the sidecar content: the output is complete and fsync'd up to
// Bytes, which hold exactly the first Units input units. Stats cover those
// units. The sidecar is replaced atomically (write, fsync, rename) only after
// the output itself has been fsync'd, so it never claims more than the disk
// holds; a crash leaves at most a tail beyond Bytes, which resume cuts off and
// redoes.
type checkpoint struct {
	Config string `json:"config"`
	Units  int    `json:"units"`
	Bytes  int64  `json:"bytes"`
	Done   bool   `json:"done"`
	Stats  Stats  `json:"stats"`
}

// openOutput opens out for writing: fresh (truncated) or, when resume is set
// and a sidecar exists, cut back to the last checkpoint.
func openOutput(out, cfg string, resume bool) (*checkpoint, *os.File, error) {
	side := progressPath(out)
	if resume {
		b, err := os.ReadFile(side)
		switch {
		case err == nil:
			var ck checkpoint
			if err := json.Unmarshal(b, &ck); err != nil {
				return nil, nil, fmt.Errorf("resume: read %s: %w", side, err)
			}
			if ck.Config != cfg {
				return nil, nil, hint.Errorf(hint.Action{Kind: hint.SetOption, Option: "mining.Options.Resume", Value: "unset"},
					"resume: %s was written with other settings or input (%s), not (%s); start afresh instead of resuming", out, ck.Config, cfg)
			}
			// A kill between the progress file's "nothing written yet"
			// and the output's creation leaves no output: nothing is lost,
			// so it is created. Missing after something was written, it is
			// an error.
			flags := os.O_RDWR
			if ck.Bytes == 0 {
				flags |= os.O_CREATE
			}
			f, err := os.OpenFile(out, flags, 0o644)
			if err != nil {
				return nil, nil, fmt.Errorf("resume: open output (its progress file says %d bytes were written): %w", ck.Bytes, err)
			}
			fi, err := f.Stat()
			if err != nil {
				f.Close()
				return nil, nil, fmt.Errorf("resume: %w", err)
			}
			if fi.Size() < ck.Bytes {
				f.Close()
				return nil, nil, fmt.Errorf("resume: %s has %d bytes but its progress file says %d were written; it was changed since", out, fi.Size(), ck.Bytes)
			}
			if err := f.Truncate(ck.Bytes); err != nil {
				f.Close()
				return nil, nil, fmt.Errorf("resume: cut partial tail: %w", err)
			}
			if _, err := f.Seek(ck.Bytes, 0); err != nil {
				f.Close()
				return nil, nil, fmt.Errorf("resume: %w", err)
			}
			return &ck, f, nil
		case errors.Is(err, fs.ErrNotExist):
			if fi, err := os.Stat(out); err == nil && fi.Size() > 0 {
				return nil, nil, fmt.Errorf("resume: %s exists but has no progress file %s; cannot tell where it stopped", out, side)
			}
		default:
			return nil, nil, fmt.Errorf("resume: %w", err)
		}
	}
	// A fresh start records "nothing written yet" before it truncates the
	// output, so that a crash at any point after leaves a progress file a
	// --resume can start from (it used to remove the old one first, and a
	// kill before the first checkpoint left an output without one).
	ck := &checkpoint{Config: cfg}
	if err := writeProgress(side, ck); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(out, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("create output: %w", err)
	}
	return ck, f, nil
}

// checkpointer appends results and checkpoints every `every` units or every
// few seconds, whichever comes first.
type checkpointer struct {
	path  string
	f     *os.File
	ck    *checkpoint
	every int
	since int
	last  time.Time
	buf   []byte
}

func (c *checkpointer) write(r result) error {
	c.buf = append(c.buf, r.out...)
	c.ck.Units++
	c.ck.Stats.add(&r.stats)
	c.since++
	if c.last.IsZero() {
		c.last = time.Now()
	}
	if c.since >= c.every || len(c.buf) > 8<<20 || time.Since(c.last) > 5*time.Second {
		return c.checkpoint()
	}
	return nil
}

func (c *checkpointer) checkpoint() error {
	if len(c.buf) > 0 {
		if _, err := c.f.Write(c.buf); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		c.ck.Bytes += int64(len(c.buf))
		c.buf = c.buf[:0]
	}
	if err := c.f.Sync(); err != nil {
		return fmt.Errorf("sync output: %w", err)
	}
	c.ck.Stats.PosScores.trim()
	c.ck.Stats.NegScores.trim()
	if err := writeProgress(progressPath(c.path), c.ck); err != nil {
		return err
	}
	c.since = 0
	c.last = time.Now()
	return nil
}

// writeProgress replaces the sidecar atomically (write, fsync, rename,
// directory fsync).
func writeProgress(side string, ck *checkpoint) error {
	b, err := json.Marshal(ck)
	if err != nil {
		return fmt.Errorf("encode progress: %w", err)
	}
	if err := atomicfile.WriteBytes(side, b); err != nil {
		return fmt.Errorf("write progress: %w", err)
	}
	return nil
}
