package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/encodertest"
)

// Sharing a directory between processes: read-only opens beside a writer
// (share.go). The other process is this test binary again, running
// TestShareChild.

const shareBatch = 100

func shareDoc(n int) engine.Document {
	d := doc(n)
	d.Meta = map[string]string{"parity": []string{"even", "odd"}[n%2]}
	return d
}

// slowHashing embeds like Hashing, a little slowly, so that a reindex
// lasts long enough to be read beside.
type slowHashing struct{ *encodertest.Hashing }

func (s slowHashing) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	time.Sleep(10 * time.Millisecond)
	return s.Hashing.EmbedDocuments(ctx, texts)
}

// TestShareChild is the other process of the sharing tests: with
// ANNA_SHARE_MODE "index" it indexes ANNA_SHARE_N documents in batches of
// shareBatch into ANNA_SHARE_CHILD, printing "committed B" after each and
// "done" at the end; "reindex" moves the directory to model fp-b
// ("reindexed" when done); "hold" opens it read-only. It then keeps the
// engine open until its stdin closes, closes it and prints "closed".
func TestShareChild(t *testing.T) {
	dir := os.Getenv("ANNA_SHARE_CHILD")
	if dir == "" {
		t.Skip("child process of the sharing tests")
	}
	ctx := context.Background()
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	var e *engine.Engine
	var err error
	switch os.Getenv("ANNA_SHARE_MODE") {
	case "index":
		every, _ := strconv.Atoi(os.Getenv("ANNA_SHARE_CHECKPOINT"))
		if e, err = engine.Open(ctx, dir, engine.Options{Encoder: hashEnc("fp-a"), CheckpointChanges: every}); err != nil {
			fail(err)
		}
		n, _ := strconv.Atoi(os.Getenv("ANNA_SHARE_N"))
		for b := 0; b*shareBatch < n; b++ {
			var docs []engine.Document
			for i := b * shareBatch; i < min(n, (b+1)*shareBatch); i++ {
				docs = append(docs, shareDoc(i))
			}
			if _, err := e.Add(ctx, docs); err != nil {
				fail(err)
			}
			fmt.Printf("committed %d\n", b)
		}
		fmt.Println("done")
	case "reindex":
		if e, err = engine.Open(ctx, dir, engine.Options{Encoder: hashEnc("fp-a")}); err != nil {
			fail(err)
		}
		fmt.Println("open")
		if err := e.Reindex(ctx, engine.ReindexOptions{Encoder: slowHashing{&encodertest.Hashing{D: 32, FP: "fp-b"}}, BatchSize: 25}); err != nil {
			fail(err)
		}
		fmt.Println("reindexed")
	case "hold":
		if e, err = engine.Open(ctx, dir, engine.Options{ReadOnly: true, Encoder: hashEnc("fp-a")}); err != nil {
			fail(err)
		}
		fmt.Println("open")
	case "readloop": // open read-only, search, close, over and over until stdin closes
		stop := make(chan struct{})
		go func() { io.Copy(io.Discard, os.Stdin); close(stop) }()
		for n := 0; ; n++ {
			select {
			case <-stop:
				fmt.Println("closed", n)
				os.Exit(0)
			default:
			}
			r, err := engine.Open(ctx, dir, engine.Options{ReadOnly: true, Encoder: hashEnc("fp-a")})
			if err != nil {
				fail(err)
			}
			if _, err := r.Search(ctx, "shared words", engine.SearchOptions{K: 5}); err != nil {
				fail(err)
			}
			r.Close()
			if n == 0 {
				fmt.Println("looping")
			}
		}
	default:
		fail(fmt.Errorf("ANNA_SHARE_MODE %q", os.Getenv("ANNA_SHARE_MODE")))
	}
	io.Copy(io.Discard, os.Stdin)
	if err := e.Close(); err != nil {
		fail(err)
	}
	fmt.Println("closed")
	os.Exit(0)
}

type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startChild(t *testing.T, dir, mode string, n int) *child {
	t.Helper()
	return startChildEnv(t, dir, mode, n)
}

// startChildEnv is startChild with more of the child's environment.
func startChildEnv(t *testing.T, dir, mode string, n int, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestShareChild$", "-test.v=false")
	cmd.Env = append(append(os.Environ(), "ANNA_SHARE_CHILD="+dir, "ANNA_SHARE_MODE="+mode, fmt.Sprintf("ANNA_SHARE_N=%d", n)), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 1000)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return c
}

// await returns the child's next line, failing on an error it prints or
// after 60 s (a hang).
func (c *child) await(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatal("the child exited")
		}
		if strings.HasPrefix(l, "error") {
			t.Fatalf("child: %s", l)
		}
		return l
	case <-time.After(60 * time.Second):
		t.Fatal("the child printed nothing for 60 s")
	}
	return ""
}

// awaitLine waits for the line want.
func (c *child) awaitLine(t *testing.T, want string) {
	t.Helper()
	for c.await(t) != want {
	}
}

// stop closes the child's stdin and waits until it has closed its engine.
func (c *child) stop(t *testing.T) {
	t.Helper()
	c.stdin.Close()
	c.awaitLine(t, "closed")
	if err := c.cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}

// shareQueries exercise every read path: each mode, a filter, snippets,
// another fusion.
var shareQueries = []struct {
	q    string
	opts engine.SearchOptions
}{
	{"shared", engine.SearchOptions{Mode: engine.ModeLexical, K: 20}},
	{"tok17 search", engine.SearchOptions{Mode: engine.ModeDense, K: 10}},
	{"tok42 engines", engine.SearchOptions{K: 10, Snippets: true}},
	{"title 7 words", engine.SearchOptions{K: 10, Filter: engine.Eq("parity", "odd"), Fusion: engine.FusionMinMax}},
}

func runQueries(t *testing.T, e *engine.Engine) [][]engine.Result {
	t.Helper()
	var out [][]engine.Result
	for _, q := range shareQueries {
		res, err := e.Search(context.Background(), q.q, q.opts)
		if err != nil {
			t.Fatalf("%q: %v", q.q, err)
		}
		if len(res) == 0 {
			t.Fatalf("%q: no results", q.q)
		}
		out = append(out, res)
	}
	return out
}

func openRO(t *testing.T, dir string, opts engine.Options) *engine.Engine {
	t.Helper()
	opts.ReadOnly = true
	e, err := engine.Open(context.Background(), dir, opts)
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	return e
}

// readWhole opens dir read-only and checks that it sees whole batches only
// (what a committed state holds); it returns the documents the BM25 index
// holds and the pid of the writer it read through.
func readWhole(t *testing.T, dir string, opts engine.Options) (int, int) {
	t.Helper()
	ctx := context.Background()
	e := openRO(t, dir, opts)
	defer e.Close()
	st, err := e.Stats()
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	if st.Documents%shareBatch != 0 || st.Documents == 0 {
		t.Fatalf("stats: %d documents: not whole batches", st.Documents)
	}
	res, err := e.Search(ctx, "shared", engine.SearchOptions{Mode: engine.ModeLexical, K: 100000})
	if err != nil {
		t.Fatalf("lexical search: %v", err)
	}
	// The BM25 index takes each batch whole, just after its commit.
	if len(res)%shareBatch != 0 || len(res) == 0 {
		t.Fatalf("lexical search: %d documents: not whole batches", len(res))
	}
	for _, r := range res {
		n, err := strconv.Atoi(strings.TrimPrefix(r.ID, "d"))
		if err != nil || r.Text != shareDoc(n).Text || r.Meta["parity"] != shareDoc(n).Meta["parity"] {
			t.Fatalf("result %+v is not document %s as added", r, r.ID)
		}
	}
	hy, err := e.Search(ctx, "tok5 engines", engine.SearchOptions{K: 10, Filter: engine.Eq("parity", "odd"), Snippets: true})
	if err != nil || len(hy) == 0 {
		t.Fatalf("hybrid search: %d results, %v", len(hy), err)
	}
	for _, r := range hy {
		if r.Meta["parity"] != "odd" || r.Snippet == nil {
			t.Fatalf("hybrid search: %+v (want odd parity, with a snippet)", r)
		}
	}
	got, err := e.Get(ctx, res[0].ID)
	if err != nil || len(got) != 1 || got[0].ID != res[0].ID {
		t.Fatalf("get %s: %v %v", res[0].ID, got, err)
	}
	return len(res), st.WriterPID
}

// TestReadWhileIndexing: while another process indexes thousands of
// documents, read-only opens succeed and see whole batches, through the
// writer; once it has closed, a read-only open (and a reader opened
// through it, still open) answer the same.
func TestReadWhileIndexing(t *testing.T) {
	dir := t.TempDir()
	const n = 3000
	w := startChild(t, dir, "index", n)
	w.awaitLine(t, "committed 0")
	opts := engine.Options{Encoder: hashEnc("fp-a")}
	long := openRO(t, dir, opts) // a reader that outlives the writer
	defer long.Close()
	reads, last, done := 0, 0, false
	for !done {
		docs, pid := readWhole(t, dir, opts)
		if pid != w.cmd.Process.Pid {
			t.Fatalf("read through pid %d, the writer is %d", pid, w.cmd.Process.Pid)
		}
		if docs < last {
			t.Fatalf("%d documents after %d", docs, last)
		}
		last, reads = docs, reads+1
		for more := true; more; {
			select {
			case l := <-w.lines:
				if strings.HasPrefix(l, "error") {
					t.Fatalf("child: %s", l)
				}
				done = done || l == "done"
			default:
				more = false
			}
		}
	}
	t.Logf("%d reads while indexing", reads)
	if docs, _ := readWhole(t, dir, opts); docs != n {
		t.Fatalf("through the writer after its last batch: %d documents, want %d", docs, n)
	}
	through := runQueries(t, long)
	w.stop(t)

	e := openRO(t, dir, opts)
	defer e.Close()
	if st, err := e.Stats(); err != nil || st.WriterPID != 0 || st.Documents != n {
		t.Fatalf("after the writer closed: %+v, %v", st, err)
	}
	if direct := runQueries(t, e); !reflect.DeepEqual(direct, through) {
		t.Fatalf("results differ:\nthrough the writer %+v\nafter it closed    %+v", through, direct)
	}
	if again := runQueries(t, long); !reflect.DeepEqual(again, through) {
		t.Fatalf("a reader opened through the writer answers differently once it has closed:\n%+v\n%+v", through, again)
	}
	if st, err := long.Stats(); err != nil || st.WriterPID != 0 {
		t.Fatalf("long-lived reader after the writer closed: %+v, %v", st, err)
	}
}

// TestReadWhileReindexing: searches through the writer keep working while
// it moves the directory to another model, and answer as the directory
// does once it has closed.
func TestReadWhileReindexing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openT(t, dir, "fp-a")
	var docs []engine.Document
	for i := range 1000 {
		docs = append(docs, shareDoc(i))
	}
	if _, err := e.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	e.Close()
	w := startChild(t, dir, "reindex", 0)
	w.awaitLine(t, "open")
	reads, done, models := 0, false, map[string]bool{}
	for !done {
		r := openRO(t, dir, engine.Options{}) // no model: the writer embeds
		st, err := r.Stats()
		if err != nil || st.WriterPID != w.cmd.Process.Pid {
			t.Fatalf("stats during the reindex: %+v, %v", st, err)
		}
		models[st.Model.Fingerprint] = true
		for _, m := range []engine.Mode{engine.ModeDense, engine.ModeHybrid} {
			if res, err := r.Search(ctx, "tok5 engines", engine.SearchOptions{Mode: m, K: 10}); err != nil || len(res) != 10 {
				t.Fatalf("%s search during the reindex: %d results, %v", m, len(res), err)
			}
		}
		r.Close()
		reads++
		select {
		case l := <-w.lines:
			if strings.HasPrefix(l, "error") {
				t.Fatalf("child: %s", l)
			}
			done = l == "reindexed"
		default:
		}
	}
	t.Logf("%d reads during the reindex; models seen %v", reads, models)
	r := openRO(t, dir, engine.Options{})
	defer r.Close()
	if m := r.Model(); m.Fingerprint != "fp-b" || m.Dim != 32 {
		t.Fatalf("model through the writer after the reindex: %+v", m)
	}
	through := runQueries(t, r)
	w.stop(t)
	d := openRO(t, dir, engine.Options{Encoder: &encodertest.Hashing{D: 32, FP: "fp-b"}})
	defer d.Close()
	if direct := runQueries(t, d); !reflect.DeepEqual(direct, through) {
		t.Fatalf("results differ:\nthrough the writer %+v\nafter it closed    %+v", through, direct)
	}
}

// TestReadAfterWriterKilled: a writer killed with SIGKILL leaves its
// socket behind; nobody waits on it: a reader that read through it goes on
// with the directory itself, a new read-only open reads it directly, and
// the next writer replaces the socket.
func TestReadAfterWriterKilled(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w := startChild(t, dir, "index", 1_000_000)
	w.awaitLine(t, "committed 3")
	opts := engine.Options{Encoder: hashEnc("fp-a")}
	long := openRO(t, dir, opts)
	defer long.Close()
	if st, err := long.Stats(); err != nil || st.WriterPID != w.cmd.Process.Pid {
		t.Fatalf("before the kill: %+v, %v", st, err)
	}
	w.cmd.Process.Signal(syscall.SIGKILL)
	w.cmd.Wait()
	if _, err := os.Stat(filepath.Join(dir, "anna.sock")); err != nil {
		t.Fatalf("the killed writer's socket: %v", err)
	}
	within(t, 10*time.Second, "the reader opened through the killed writer", func() {
		st, err := long.Stats()
		if err != nil || st.WriterPID != 0 || st.Documents < 4*shareBatch || st.Documents%shareBatch != 0 {
			t.Errorf("stats: %+v, %v", st, err)
		}
		if res, err := long.Search(ctx, "tok5 engines", engine.SearchOptions{Mode: engine.ModeDense, K: 10}); err != nil || len(res) != 10 {
			t.Errorf("dense search: %d results, %v", len(res), err)
		}
	})
	within(t, 10*time.Second, "a read-only open after the kill", func() {
		r := openRO(t, dir, opts)
		defer r.Close()
		if st, err := r.Stats(); err != nil || st.WriterPID != 0 {
			t.Errorf("stats: %+v, %v", st, err)
		}
	})
	long.Close()
	within(t, 10*time.Second, "a writer after the kill, and a reader beside it", func() {
		e := openT(t, dir, "fp-a") // replays what the killed one left undone
		defer e.Close()
		docs, pid := readWhole(t, dir, opts)
		if pid != os.Getpid() {
			t.Errorf("read through pid %d, want this process (%d)", pid, os.Getpid())
		}
		if st, err := e.Stats(); err != nil || st.Documents != docs {
			t.Errorf("the writer has %+v (%v); read through it: %d documents", st, err, docs)
		}
	})
}

// within runs f, ending the test binary if f has not returned after d (a
// hang).
// TestStoppedWriter: a writer that has stopped (SIGSTOP) keeps its socket
// and lock, but answers nothing: a read-only open gives up with ErrLocked
// instead of hanging, and reads through it again once it goes on.
func TestStoppedWriter(t *testing.T) {
	dir := t.TempDir()
	w := startChild(t, dir, "index", 1_000_000)
	w.awaitLine(t, "committed 0")
	defer engine.ShortenShareWaits(500*time.Millisecond, 300*time.Millisecond)()
	w.cmd.Process.Signal(syscall.SIGSTOP)
	awaitStopped(t, w.cmd.Process.Pid) // kill(2) returns before the child has stopped
	within(t, 10*time.Second, "a read-only open beside a stopped writer", func() {
		_, err := engine.Open(context.Background(), dir, engine.Options{ReadOnly: true})
		if !errors.Is(err, engine.ErrLocked) || !strings.Contains(err.Error(), "without answering") {
			t.Errorf("read-only open beside a stopped writer: %v", err)
		}
	})
	w.cmd.Process.Signal(syscall.SIGCONT)
	within(t, 10*time.Second, "a read-only open once the writer goes on", func() {
		r := openRO(t, dir, engine.Options{})
		defer r.Close()
		if st, err := r.Stats(); err != nil || st.WriterPID != w.cmd.Process.Pid {
			t.Errorf("stats: %+v, %v", st, err)
		}
	})
}

// awaitStopped waits until /proc says the process is stopped (state T):
// a signal is delivered after kill(2) returns, and a child still running
// for a few milliseconds would answer the socket the test expects silent.
func awaitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatalf("reading the child's state: %v", err)
		}
		// the state follows the command name, which is in parentheses
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("process %d did not stop within 10 s of SIGSTOP", pid)
}

func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	timer := time.AfterFunc(d, func() { panic(fmt.Sprintf("%s: %s: no answer within %v (hung)", t.Name(), what, d)) })
	defer timer.Stop()
	f()
}

// TestWriterWaitsForReaders: a writable open waits for a read-only open of
// another process to close rather than failing at once.
func TestWriterWaitsForReaders(t *testing.T) {
	dir := t.TempDir()
	e := openT(t, dir, "fp-a")
	addN(t, e, 0, 10)
	e.Close()
	r := startChild(t, dir, "hold", 0)
	r.awaitLine(t, "open")
	go func() {
		time.Sleep(time.Second) // longer than the lock wait used to be
		r.stdin.Close()
	}()
	var logged []string
	within(t, 30*time.Second, "a writable open beside a reader", func() {
		w, err := engine.Open(context.Background(), dir, engine.Options{Encoder: hashEnc("fp-a"), Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
		if err != nil {
			t.Errorf("writable open while another process reads: %v", err)
			return
		}
		w.Close()
	})
	if !strings.Contains(strings.Join(logged, "\n"), "waiting up to") {
		t.Errorf("the wait was not logged: %q", logged)
	}
}

// TestOpenTwiceInProcess: a second writable open in the same process says
// so at once; a read-only one beside this process's writer reads through
// it.
func TestOpenTwiceInProcess(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openT(t, dir, "fp-a")
	addN(t, e, 0, 10)
	within(t, 5*time.Second, "a second writable open", func() {
		_, err := engine.Open(ctx, dir, engine.Options{Encoder: hashEnc("fp-a")})
		if !errors.Is(err, engine.ErrLocked) || !strings.Contains(err.Error(), "already open for writing in this process") {
			t.Errorf("second writable open: %v", err)
		}
	})
	r := openRO(t, dir, engine.Options{})
	if st, err := r.Stats(); err != nil || st.WriterPID != os.Getpid() || st.Documents != 10 {
		t.Fatalf("read-only beside this process's writer: %+v, %v", st, err)
	}
	r.Close()
	e.Close()

	r = openRO(t, dir, engine.Options{Encoder: hashEnc("fp-a")})
	defer r.Close()
	within(t, 5*time.Second, "a writable open beside this process's reader", func() {
		_, err := engine.Open(ctx, dir, engine.Options{Encoder: hashEnc("fp-a")})
		if !errors.Is(err, engine.ErrLocked) || !strings.Contains(err.Error(), "already open read-only in this process") {
			t.Errorf("writable open beside a read-only one: %v", err)
		}
	})
	r2 := openRO(t, dir, engine.Options{Encoder: hashEnc("fp-a")}) // readers share
	r2.Close()
}

// TestNoShare: a writer opened with NoShare answers no reader.
func TestNoShare(t *testing.T) {
	dir := t.TempDir()
	e, err := engine.Open(context.Background(), dir, engine.Options{Encoder: hashEnc("fp-a"), NoShare: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	addN(t, e, 0, 10)
	if _, err := os.Stat(filepath.Join(dir, "anna.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("NoShare made a socket: %v", err)
	}
	if _, err := engine.Open(context.Background(), dir, engine.Options{ReadOnly: true, Encoder: hashEnc("fp-a")}); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("read-only beside a NoShare writer: %v", err)
	}
}

// TestReadThroughWriter compares every read method through the writer
// with the writer's own answers, in a directory whose path is too long
// for a socket address (and in a short one).
func TestReadThroughWriter(t *testing.T) {
	deep := t.TempDir()
	for len(deep) < 150 {
		deep = filepath.Join(deep, "a-rather-long-directory-name")
	}
	for name, dir := range map[string]string{"short": t.TempDir(), "deep": deep} {
		t.Run(name, func(t *testing.T) { testReadThroughWriter(t, dir) })
	}
}

func testReadThroughWriter(t *testing.T, dir string) {
	ctx := context.Background()
	rr := &lengthReranker{}
	w, err := engine.Open(ctx, dir, engine.Options{Encoder: hashEnc("fp-a"), Reranker: rr})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var docs []engine.Document
	for i := range 200 {
		docs = append(docs, shareDoc(i))
	}
	if _, err := w.Add(ctx, docs); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "anna.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("anna.sock: %v (want a socket, mode 0600)", fi.Mode())
	}
	r := openRO(t, dir, engine.Options{Reranker: rr, Encoder: hashEnc("fp-a")}) // the encoder: for when the writer has gone
	defer r.Close()
	if st, err := r.Stats(); err != nil || st.WriterPID != os.Getpid() {
		t.Fatalf("not read through the writer: %+v, %v", st, err)
	}
	if r.Model() != w.Model() || r.Chunking() != w.Chunking() {
		t.Fatalf("model %+v %v, the writer's %+v %v", r.Model(), r.Chunking(), w.Model(), w.Chunking())
	}
	if m, err := engine.RecordedModel(dir); err != nil || m.Fingerprint != "fp-a" || m.Dim != 64 {
		t.Fatalf("RecordedModel beside the writer: %+v, %v", m, err)
	}
	searches := []engine.SearchOptions{
		{Mode: engine.ModeLexical, K: 5},
		{Mode: engine.ModeDense, K: 5, EfSearch: 100},
		{K: 7, Snippets: true, SnippetSize: 40, Filter: engine.Or(engine.Eq("parity", "even"), engine.Prefix("parity", "o"))},
		{K: 5, Fusion: engine.FusionDBSF, Weights: map[string]float64{"dense": 2}},
		{Mode: engine.ModeRerank, K: 5, RerankDepth: 20, Snippets: true},
		{Mode: engine.ModeRerank, RerankOf: engine.ModeLexical, RerankFusion: true, K: 5},
	}
	for _, o := range searches {
		want, err := w.Search(ctx, "tok12 search engines", o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Search(ctx, "tok12 search engines", o)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v: through the writer %+v (%v), the writer's own %+v", o, got, err, want)
		}
	}
	wantDocs, _ := w.Get(ctx, "d00003", "nope", "d00001")
	if got, err := r.Get(ctx, "d00003", "nope", "d00001"); err != nil || !reflect.DeepEqual(got, wantDocs) {
		t.Fatalf("get: %+v %v, want %+v", got, err, wantDocs)
	}
	wantV, _, _ := w.Teacher().Vectors("d00004")
	if got, ok, err := r.Teacher().Vectors("d00004"); err != nil || !ok || !reflect.DeepEqual(got, wantV) {
		t.Fatalf("vectors: %v %v %v", got, ok, err)
	}
	if _, ok, err := r.Teacher().Vectors("nope"); err != nil || ok {
		t.Fatalf("vectors of nothing: %v %v", ok, err)
	}
	scoreDocs := []engine.Document{{Title: "x", Text: "search engines tok12"}, {Text: "nothing in common"}}
	wantS, _ := w.Teacher().LexicalScores(ctx, "tok12 engines", scoreDocs)
	if got, err := r.Teacher().LexicalScores(ctx, "tok12 engines", scoreDocs); err != nil || !reflect.DeepEqual(got, wantS) {
		t.Fatalf("lexical scores: %v %v, want %v", got, err, wantS)
	}
	// The warnings a search prints, and the keys a page offers, are the
	// writer's.
	unknown, err := r.UnknownKeys(engine.And(engine.Eq("parity", "odd"), engine.Eq("color", "red")))
	if err != nil || !reflect.DeepEqual(unknown, []string{"color"}) {
		t.Fatalf("unknown keys through the writer: %v %v", unknown, err)
	}
	wantKeys, _ := w.MetadataKeys(ctx, 5)
	if got, err := r.MetadataKeys(ctx, 5); err != nil || !reflect.DeepEqual(got, wantKeys) || len(got) != 1 || got[0].Values != 2 {
		t.Fatalf("metadata keys through the writer: %+v %v, want %+v", got, err, wantKeys)
	}
	plain := openRO(t, dir, engine.Options{})
	if _, err := plain.Search(ctx, "tok12", engine.SearchOptions{Mode: engine.ModeRerank}); !errors.Is(err, engine.ErrInvalidOption) {
		t.Fatalf("rerank without a reranker, through the writer: %v", err)
	}
	plain.Close()
	if _, err := r.Add(ctx, docs[:1]); !errors.Is(err, engine.ErrReadOnly) {
		t.Fatalf("add through a read-only engine: %v", err)
	}
	// A later commit is seen at once.
	if _, err := w.Add(ctx, []engine.Document{shareDoc(500)}); err != nil {
		t.Fatal(err)
	}
	if st, err := r.Stats(); err != nil || st.Documents != 201 {
		t.Fatalf("after a commit: %+v, %v", st, err)
	}
	// Once the writer closes, the reader reads the directory itself.
	want, _ := w.Search(ctx, "tok7", engine.SearchOptions{K: 5, Snippets: true})
	w.Close()
	if _, err := os.Stat(filepath.Join(dir, "anna.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("anna.sock after Close: %v", err)
	}
	got, err := r.Search(ctx, "tok7", engine.SearchOptions{K: 5, Snippets: true})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after the writer closed: %+v %v, want %+v", got, err, want)
	}
	if st, err := r.Stats(); err != nil || st.WriterPID != 0 {
		t.Fatalf("after the writer closed: %+v, %v", st, err)
	}
}

// TestWriteThrough: a writable open with Options.WriteThrough beside
// another process's writer adds and deletes through it (what annactl index
// and delete do beside annactl serve), refuses another model, Reindex,
// SetFusion and SetState/State, and once that writer has closed, writes the directory itself.
func TestWriteThrough(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := startChild(t, dir, "index", 100)
	c.awaitLine(t, "done")
	if _, err := engine.Open(ctx, dir, engine.Options{Encoder: hashEnc("fp-a")}); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("a writer beside a writer, without WriteThrough: %v", err)
	}
	var mm *engine.ModelMismatchError
	if _, err := engine.Open(ctx, dir, engine.Options{Encoder: hashEnc("fp-b"), WriteThrough: true}); !errors.As(err, &mm) {
		t.Fatalf("write through with another model: %v", err)
	}
	e, err := engine.Open(ctx, dir, engine.Options{Encoder: hashEnc("fp-a"), WriteThrough: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	st, err := e.Stats()
	if err != nil || st.WriterPID != c.cmd.Process.Pid || st.ReadOnly || st.Documents != 100 {
		t.Fatalf("stats through the writer: %+v, %v", st, err)
	}
	var docs []engine.Document
	for i := 100; i < 150; i++ {
		docs = append(docs, shareDoc(i))
	}
	if res, err := e.Add(ctx, docs); err != nil || res.Added != 50 || !res.Committed {
		t.Fatalf("add through the writer: %+v, %v", res, err)
	}
	if res, err := e.Add(ctx, docs); err != nil || res.Unchanged != 50 {
		t.Fatalf("add again: %+v, %v", res, err)
	}
	if n, err := e.Delete(ctx, []string{"d00000", "d00001", "nope"}); err != nil || n != 2 {
		t.Fatalf("delete through the writer: %d, %v", n, err)
	}
	ids, err := e.Teacher().IDs(ctx)
	if err != nil || len(ids) != 148 || ids[0] != "d00002" {
		t.Fatalf("IDs through the writer: %d, %v", len(ids), err)
	}
	// Keep the even documents: 74 odd ones go.
	n, err := e.Teacher().DeleteExcept(ctx, func(id string) bool {
		k, _ := strconv.Atoi(strings.TrimPrefix(id, "d"))
		return k%2 == 0
	}, 10)
	if err != nil || n != 74 {
		t.Fatalf("delete except through the writer: %d, %v", n, err)
	}
	if unknown, err := e.UnknownKeys(engine.Eq("color", "red")); err != nil || !reflect.DeepEqual(unknown, []string{"color"}) {
		t.Fatalf("unknown keys: %v %v", unknown, err)
	}
	// Apply: one more, one fewer, in one commit there (what a folder's sync sends).
	if res, err := e.Apply(ctx, []engine.Document{shareDoc(2000)}, []string{"d00002"}); err != nil || res.Added != 1 {
		t.Fatalf("apply through the writer: %+v, %v", res, err)
	}
	var listed []string
	if err := e.Documents(ctx, func(d engine.Document) error { listed = append(listed, d.ID); return nil }); err != nil || len(listed) != 74 || listed[0] != "d00004" || listed[73] != "d02000" {
		t.Fatalf("documents through the writer: %d, first %v, %v", len(listed), listed[:min(2, len(listed))], err)
	}
	if err := e.Reindex(ctx, engine.ReindexOptions{Encoder: hashEnc("fp-b")}); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("reindex through the writer: %v", err)
	}
	if err := e.SetFusion(engine.FusionChoice{Fusion: engine.FusionMinMax}); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("set fusion through the writer: %v", err)
	}
	if err := e.SetState("k", []byte("v")); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("set state through the writer: %v", err)
	}
	if _, err := e.State("k"); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("state through the writer: %v", err)
	}
	// What the writer itself holds now.
	r := openRO(t, dir, engine.Options{})
	if st, err := r.Stats(); err != nil || st.Documents != 74 || st.WriterPID != c.cmd.Process.Pid {
		t.Fatalf("the writer holds %+v, %v; want 74 documents", st, err)
	}
	r.Close()
	// The writer goes: the next write opens the directory here.
	c.stop(t)
	if res, err := e.Add(ctx, []engine.Document{shareDoc(1000)}); err != nil || res.Added != 1 {
		t.Fatalf("add once the writer has gone: %+v, %v", res, err)
	}
	if st, err := e.Stats(); err != nil || st.WriterPID != 0 || st.Documents != 75 {
		t.Fatalf("after the writer closed: %+v, %v", st, err)
	}
	if err := e.SetState("k", []byte("v")); err != nil {
		t.Fatalf("set state once the writer has gone: %v", err)
	}
	if v, err := e.State("k"); err != nil || string(v) != "v" {
		t.Fatalf("state once the writer has gone: %q, %v", v, err)
	}
	// SetFusion records (it returned nil and recorded nothing); Reindex
	// says it cannot (it returned nil and reindexed nothing).
	if err := e.SetFusion(engine.FusionChoice{Fusion: engine.FusionMinMax, Why: "t"}); err != nil {
		t.Fatalf("set fusion once the writer has gone: %v", err)
	}
	if st, err := e.Stats(); err != nil || st.Fusion != engine.FusionMinMax {
		t.Fatalf("the fusion once the writer has gone: %v, %v; want minmax recorded", st.Fusion, err)
	}
	if err := e.Reindex(ctx, engine.ReindexOptions{Encoder: hashEnc("fp-b")}); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("reindex once the writer has gone: %v, want ErrLocked", err)
	}
}
