package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anna-search/anna/engine"
)

// watchChild is `annactl index --watch` running in a child process, its
// stderr kept.
type watchChild struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	log strings.Builder
}

func startWatch(t *testing.T, dir, folder string) *watchChild {
	t.Helper()
	w := &watchChild{cmd: child("index", "--index", dir, "--watch", folder)}
	pr, err := w.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	w.cmd.Stdout = io.Discard
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			w.mu.Lock()
			w.log.WriteString(sc.Text() + "\n")
			w.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "watching ") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(2 * time.Minute):
		w.cmd.Process.Kill()
		t.Fatalf("the watch did not start:\n%s", w.stderr())
	}
	return w
}

// waitLog waits for s in the child's stderr.
func (w *watchChild) waitLog(t *testing.T, s string) {
	t.Helper()
	for start := time.Now(); !strings.Contains(w.stderr(), s); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the watch never said %q:\n%s", s, w.stderr())
		}
	}
}

func (w *watchChild) stderr() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.log.String()
}

// cpu is the child's CPU time so far.
func (w *watchChild) cpu(t *testing.T) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", w.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// paths is where the lexical search for q finds documents: their paths.
func paths(t *testing.T, dir, q string) []string {
	t.Helper()
	eng, err := engine.Open(context.Background(), dir, engine.Options{ReadOnly: true})
	if err != nil {
		return nil
	}
	defer eng.Close()
	rs, err := eng.Search(context.Background(), q, engine.SearchOptions{Mode: engine.ModeLexical, K: 10})
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range rs {
		out = append(out, r.Meta["path"])
	}
	return out
}

// within waits until the search for q finds exactly want (paths; none for
// nil), and returns how long that took from since.
func within(t *testing.T, w *watchChild, dir, q string, since time.Time, want ...string) time.Duration {
	t.Helper()
	const hang = 20 * time.Second // a bound that catches a hang; the measured times are logged
	for {
		got := paths(t, dir, q)
		if strings.Join(got, ",") == strings.Join(want, ",") {
			return time.Since(since)
		}
		if time.Since(since) > hang {
			t.Fatalf("%q finds %q, want %q after %v\n%s", q, got, want, hang, w.stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWatch: a watched folder's changes reach search — a file created, an
// editor's atomic save (temporary file renamed over it), a rename (moved
// with its vectors), a deletion, mkdir -p a/b/c with a file, a file
// written slowly, a folder deleted and made again — each within seconds;
// the watcher costs no CPU while nothing changes; killed (SIGKILL) and
// started again after changes made meanwhile, it catches up with nothing
// lost or stale and the directory checks clean; SIGTERM stops it cleanly.
func TestWatch(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	folder, dir := filepath.Join(tmp, "notes"), filepath.Join(tmp, "idx")
	write := func(rel, body string) time.Time {
		p := filepath.Join(folder, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	write("keep.md", "# Keep\n\nThe lamp reservoir holds paraffin for fourteen hours.\n")
	w := startWatch(t, dir, folder)
	defer func() {
		if w.cmd.ProcessState == nil {
			w.cmd.Process.Kill()
			w.cmd.Wait()
		}
	}()
	times := map[string]time.Duration{}
	times["create"] = within(t, w, dir, "zephyrwind", write("new.md", "# New\n\nA zephyrwind blew across the rock.\n"), "new.md")

	// An editor's save: the new text written aside, renamed over the file.
	write("new.md.tmp~", "# New\n\nA quagmire of kelp at low tide.\n")
	if err := os.Rename(filepath.Join(folder, "new.md.tmp~"), filepath.Join(folder, "new.md")); err != nil {
		t.Fatal(err)
	}
	saved := time.Now()
	times["atomic save"] = within(t, w, dir, "quagmire", saved, "new.md")
	within(t, w, dir, "zephyrwind", saved)

	if err := os.Rename(filepath.Join(folder, "new.md"), filepath.Join(folder, "renamed.md")); err != nil {
		t.Fatal(err)
	}
	times["rename"] = within(t, w, dir, "quagmire", time.Now(), "renamed.md")
	w.waitLog(t, "1 file moved, 0 files gone; documents: 1 added, 0 updated, 1 removed (1 kept their vectors)")

	if err := os.Remove(filepath.Join(folder, "renamed.md")); err != nil {
		t.Fatal(err)
	}
	times["delete"] = within(t, w, dir, "quagmire", time.Now())

	times["mkdir -p a/b/c"] = within(t, w, dir, "xylograph", write("a/b/c/deep.txt", "Deep\n\nA xylograph of the chart.\n"), "a/b/c/deep.txt")

	// A file written slowly: searchable with its last words.
	f, err := os.Create(filepath.Join(folder, "slow.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Slow\n\nThe first words ", "come before the middle ", "and the last word is marigold.\n"} {
		f.WriteString(s)
		time.Sleep(200 * time.Millisecond)
	}
	f.Close()
	times["slow write"] = within(t, w, dir, "marigold", time.Now().Add(-200*time.Millisecond), "slow.txt")

	if err := os.RemoveAll(filepath.Join(folder, "a")); err != nil {
		t.Fatal(err)
	}
	times["folder deleted and made again"] = within(t, w, dir, "jubilant", write("a/b/again.md", "# Again\n\nA jubilant keeper.\n"), "a/b/again.md")
	within(t, w, dir, "xylograph", time.Now())
	t.Logf("visible to search after: %v", times)

	// Idle: no CPU while nothing changes.
	before := w.cpu(t)
	time.Sleep(3 * time.Second)
	if idle := w.cpu(t) - before; idle > 150*time.Millisecond {
		t.Errorf("the idle watcher used %v of CPU in 3 s", idle)
	} else {
		t.Logf("idle CPU: %v in 3 s", idle)
	}

	// Killed, changed meanwhile, started again: it catches up.
	w.cmd.Process.Signal(syscall.SIGKILL)
	w.cmd.Wait()
	write("keep.md", "# Keep\n\nThe lamp reservoir holds paraffin for twenty hours.\n")
	os.Remove(filepath.Join(folder, "slow.txt"))
	write("while-down.md", "# Down\n\nWritten while the watcher was down: halcyon.\n")
	w = startWatch(t, dir, folder)
	within(t, w, dir, "halcyon", time.Now(), "while-down.md")
	within(t, w, dir, "marigold", time.Now())
	within(t, w, dir, "twenty", time.Now(), "keep.md")
	within(t, w, dir, "fourteen", time.Now())
	within(t, w, dir, "jubilant", time.Now(), "a/b/again.md")

	w.cmd.Process.Signal(syscall.SIGTERM)
	if err := w.cmd.Wait(); err != nil || !strings.Contains(w.stderr(), "stopped watching") {
		t.Fatalf("SIGTERM: %v\n%s", err, w.stderr())
	}
	rep, err := engine.Check(context.Background(), dir)
	if err != nil || !rep.OK() {
		t.Fatalf("check after the watch: %v %v", rep, err)
	}
	eng, err := engine.Open(context.Background(), dir, engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if ids, err := eng.Teacher().IDs(context.Background()); err != nil || strings.Join(ids, ",") != "a/b/again.md,keep.md,while-down.md" {
		t.Fatalf("stored %q (%v), want keep.md, while-down.md and a/b/again.md", ids, err)
	}
}

// TestServeWatch: serve --watch FOLDER answers searches for a file saved
// in the folder while it serves, with the hit's location, and stops
// cleanly on SIGTERM.
func TestServeWatch(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	folder := filepath.Join(tmp, "notes")
	os.MkdirAll(folder, 0o755)
	os.WriteFile(filepath.Join(folder, "a.md"), []byte("# A\n\nThe first note.\n"), 0o644)
	sv, url, log := serveChild(t, "--index", filepath.Join(tmp, "idx"), "--watch", folder)
	os.WriteFile(filepath.Join(folder, "b.md"), []byte("# B\n\nLine two.\n\nThe tern nests on the shingle.\n"), 0o644)
	last := ""
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Post(url+"/v1/search", "application/json", strings.NewReader(`{"query": "tern shingle", "k": 1, "mode": "lexical", "snippets": true, "snippet_size": 20}`))
		if err == nil {
			var out struct {
				Hits []struct {
					Location *struct{ Label string } `json:"location"`
				} `json:"hits"`
			}
			json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			if len(out.Hits) == 1 && out.Hits[0].Location != nil {
				if last = out.Hits[0].Location.Label; strings.HasPrefix(last, "b.md:") && strings.HasSuffix(last, "5") {
					break
				}
			}
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the saved file never reached the server's search (last location %q):\n%s", last, log.String())
		}
	}
	sv.cmd.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, sv); code != 0 || !strings.Contains(log.String(), "stopped watching") {
		t.Fatalf("exit %d:\n%s", code, log.String())
	}
}
