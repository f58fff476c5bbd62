package engine_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/engine"
)

// TestWriterFairness: issue 59's fourth finding. With four processes
// opening the directory read-only, searching and closing it in
// overlapping loops, `annactl index` failed 3 of 3 times after 10 s with
// "locked by another process": some reader always held bbolt's shared
// lock. A writer now takes the turnstile (anna.lock) while it waits, new
// readers hold back, and it gets the lock once the readers already in
// have closed; they then read through it.
func TestWriterFairness(t *testing.T) {
	dir := t.TempDir()
	e := openT(t, dir, "fp-a")
	addN(t, e, 0, 200)
	e.Close()
	var readers []*child
	for range 4 {
		c := startChild(t, dir, "readloop", 0)
		c.awaitLine(t, "looping")
		readers = append(readers, c)
	}
	time.Sleep(500 * time.Millisecond) // the loops overlap
	for round := range 3 {
		start := time.Now()
		w, err := engine.Open(context.Background(), dir, engine.Options{Encoder: hashEnc("fp-a")})
		if err != nil {
			t.Fatalf("round %d: a writable open beside four read loops failed after %v: %v", round, time.Since(start), err)
		}
		t.Logf("round %d: the writer had the lock after %v", round, time.Since(start))
		addN(t, w, 200+round, 1)
		time.Sleep(300 * time.Millisecond) // the readers read through it meanwhile
		w.Close()
		time.Sleep(300 * time.Millisecond) // and read the directory themselves again
	}
	for _, c := range readers {
		c.stdin.Close()
		if l := c.await(t); !strings.HasPrefix(l, "closed") {
			t.Errorf("reader: %s", l)
		}
	}
}

// TestCheckBesideWriter: issue 59's fifth finding. `annactl check`
// against a running `annactl serve` failed after 500 ms, and
// engine.Check inside the writer's own process blamed "another process".
// Both now run in the writer, on its open store and indexes.
func TestCheckBesideWriter(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openT(t, dir, "fp-a")
	addN(t, e, 0, 120) // the graph's changes unsaved: in memory only
	rep, err := engine.Check(ctx, dir)
	if err != nil {
		t.Fatalf("check beside this process's writer: %v", err)
	}
	if !rep.OK() || rep.Documents != 120 || rep.WriterPID != os.Getpid() {
		t.Fatalf("check beside this process's writer: %+v", rep)
	}
	e.Close()

	w := startChild(t, dir, "index", 300)
	w.awaitLine(t, "done")
	rep, err = engine.Check(ctx, dir)
	if err != nil {
		t.Fatalf("check beside another process's writer: %v", err)
	}
	if !rep.OK() || rep.Documents != 300 || rep.WriterPID != w.cmd.Process.Pid {
		t.Fatalf("check beside another process's writer: %+v", rep)
	}
	if _, err := engine.Repair(ctx, dir, engine.RepairOptions{Encoder: hashEnc("fp-a")}); err != nil {
		t.Errorf("repair of a sound directory beside its writer: %v", err)
	}
	w.stop(t)
	rep = mustCheckOK(t, dir)
	if rep.WriterPID != 0 {
		t.Errorf("a check of a closed directory ran in process %d", rep.WriterPID)
	}
}
