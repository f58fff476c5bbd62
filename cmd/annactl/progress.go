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

	count  int    // the last update's count
	suffix string // and suffix
	within string // the work under way inside the next unit (see passages)
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
	p.count, p.suffix, p.within = done, suffix, ""
	p.draw(false)
}

// setTotal sets the units expected (the line's total and ETA).
func (p *progress) setTotal(total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = total
}

// passages reports the passages embedded so far of the documents being
// embedded (engine.Options.EmbedProgress): a batch holding long documents
// is counted as it goes, not only when it is committed. The line shows
// them after the last update's until the next one.
func (p *progress) passages(done, total int) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.within = fmt.Sprintf("(embedding: %d/%d passages)", done, total)
	p.draw(done == total)
}

// draw prints the line, unless one was printed less than 0.1 s ago (and
// neither force nor the last unit); p.mu is held.
func (p *progress) draw(force bool) {
	now := time.Now()
	if !force && now.Sub(p.last) < 100*time.Millisecond && (p.total == 0 || p.count < p.total) {
		return
	}
	p.last = now
	done := p.count
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
	if p.suffix != "" {
		line += " " + p.suffix
	}
	if p.within != "" {
		line += " " + p.within
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
}

// passageProgress hands the engine's passage counts (EmbedProgress, set
// before the engine opens) to the progress line once there is one, and
// keeps the engine's messages (Logf) off that line.
type passageProgress struct {
	mu    sync.Mutex
	p     *progress
	print func(format string, args ...any) // where messages go (app.logf)
}

// show makes p the line that shows the counts.
func (pp *passageProgress) show(p *progress) {
	pp.mu.Lock()
	pp.p = p
	pp.mu.Unlock()
}

// report is an engine.Options.EmbedProgress.
func (pp *passageProgress) report(done, total int) {
	pp.mu.Lock()
	p := pp.p
	pp.mu.Unlock()
	if p != nil {
		p.passages(done, total)
	}
}

// logf is an engine.Options.Logf: the message on a line of its own, the
// progress line drawn again below it.
func (pp *passageProgress) logf(format string, args ...any) {
	pp.mu.Lock()
	p := pp.p
	pp.mu.Unlock()
	if p == nil || !p.on {
		pp.print(format, args...)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprint(p.w, "\r\033[K")
	pp.print(format, args...)
	p.draw(true)
}

// done ends the progress line.
func (p *progress) done() {
	if p.on {
		fmt.Fprintln(p.w)
	}
}
