package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress prints a one-line status to stderr when stderr is a terminal and
// nothing when it is a pipe or file, so logs stay clean.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	total int // 0 when unknown
	start time.Time
	last  time.Time
	on    bool
}

// progress returns a progress line on a's stderr.
func (a *app) progress(label string, total int) *progress {
	return &progress{w: a.stderr, label: label, total: total, start: time.Now(), on: isTerminal(a.stderr)}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// update reports done units (and an optional suffix), at most ~10 times a second.
func (p *progress) update(done int, suffix string) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.last) < 100*time.Millisecond && (p.total == 0 || done < p.total) {
		return
	}
	p.last = now
	el := now.Sub(p.start).Seconds()
	rate := float64(done) / max(el, 1e-9)
	line := fmt.Sprintf("%s: %d", p.label, done)
	if p.total > 0 {
		line += fmt.Sprintf("/%d (%.0f%%)", p.total, 100*float64(done)/float64(p.total))
	}
	line += fmt.Sprintf(" %.1f/s", rate)
	if p.total > 0 && rate > 0 && done < p.total {
		line += " ETA " + (time.Duration(float64(p.total-done)/rate) * time.Second).Round(time.Second).String()
	}
	if suffix != "" {
		line += " " + suffix
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
}

// done ends the progress line.
func (p *progress) done() {
	if p.on {
		fmt.Fprintln(p.w)
	}
}
