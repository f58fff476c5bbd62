package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anna-search/anna/engine"
)

// served is a running `annactl serve` child.
type served struct {
	cmd  *exec.Cmd
	exit chan int // its exit code, once it has exited
}

// serveChild starts `annactl serve` as a child on a free loopback port and
// returns it with its base URL once it listens; its stderr is collected.
func serveChild(t *testing.T, args ...string) (*served, string, *syncBuffer) {
	t.Helper()
	cmd := child(append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			log.WriteString(line + "\n")
			if _, addr, ok := strings.Cut(line, "listening on http://"); ok {
				url <- "http://" + strings.Fields(addr)[0]
			}
		}
	}()
	sv := &served{cmd: cmd, exit: make(chan int, 1)}
	go func() { cmd.Wait(); pw.Close(); sv.exit <- cmd.ProcessState.ExitCode() }()
	select {
	case u := <-url:
		return sv, u, log
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("serve did not start: %s", log.String())
	}
	return nil, "", nil
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) WriteString(x string) { s.mu.Lock(); s.b.WriteString(x); s.mu.Unlock() }
func (s *syncBuffer) String() string       { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// waitExit waits for the child to exit and returns its exit code.
func waitExit(t *testing.T, sv *served) int {
	t.Helper()
	select {
	case code := <-sv.exit:
		return code
	case <-time.After(60 * time.Second):
		sv.cmd.Process.Kill()
		t.Fatal("serve did not exit within 60 s")
	}
	return -1
}

// postDocs adds docs d<from>..d<to-1> and reports whether the server
// acknowledged them.
func postDocs(url string, from, to int) bool {
	var docs []map[string]string
	for i := from; i < to; i++ {
		docs = append(docs, map[string]string{"id": fmt.Sprintf("d%03d", i), "title": fmt.Sprintf("document %d", i), "text": fmt.Sprintf("graph search vector %d tensor layer token %d", i, i*7)})
	}
	body, _ := json.Marshal(map[string]any{"documents": docs})
	resp, err := http.Post(url+"/v1/documents", "application/json", bytes.NewReader(body))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var ar struct{ Committed bool }
	return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&ar) == nil && ar.Committed
}

// TestServeLifecycle: serve answers, and SIGTERM during a write lets the
// write finish, closes the directory (no anna.sock left) and exits 0.
func TestServeLifecycle(t *testing.T) {
	needModel(t)
	dir := filepath.Join(t.TempDir(), "idx")
	cmd, url, log := serveChild(t, "--index", dir)
	if !postDocs(url, 0, 8) {
		t.Fatalf("first write not acknowledged: %s", log)
	}
	resp, err := http.Post(url+"/v1/search", "application/json", strings.NewReader(`{"query": "graph search vector 3", "k": 3}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("search: %v %v", resp, err)
	}
	resp.Body.Close()
	acked := make(chan bool)
	go func() { acked <- postDocs(url, 8, 40) }()
	time.Sleep(20 * time.Millisecond)
	cmd.cmd.Process.Signal(syscall.SIGTERM)
	ok := <-acked
	if code := waitExit(t, cmd); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, log)
	}
	if _, err := os.Stat(filepath.Join(dir, "anna.sock")); err == nil {
		t.Errorf("anna.sock left behind")
	}
	want := 8
	if ok {
		want = 40
	}
	if got := len(storeDocs(t, dir)); got != want && !(got == 40 && !ok) {
		t.Errorf("after SIGTERM the store holds %d documents, want %d (second write acknowledged: %v)", got, want, ok)
	}
	verifyDir(t, dir, len(storeDocs(t, dir)))
}

func TestServeFlags(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(serveKeyEnv, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--index", dir, "--listen", "0.0.0.0:0"}, "not loopback: set an API key"},
		{[]string{"serve", "--index", dir, "--unix", filepath.Join(dir, "anna.sock")}, "the engine's own socket"},
		{[]string{"serve", "--index", dir, "--listen", "nope"}, "want HOST:PORT"},
		{[]string{"serve", "--index", dir, "--listen", "", "--unix", ""}, "nothing to listen on"},
		{[]string{"serve", "--index", dir, "--max-k", "0"}, "--max-k"},
		{[]string{"serve", "--listen", "127.0.0.1:0"}, "--index"},
	} {
		r := annactl(t, "", c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("annactl %s: %s, want exit 2 naming %q", strings.Join(c.args, " "), r, c.want)
		}
	}
	empty := filepath.Join(dir, "key")
	os.WriteFile(empty, []byte("\n"), 0o600)
	if r := annactl(t, "", "serve", "--index", dir, "--api-key-file", empty); r.code != 2 || !strings.Contains(r.stderr, "empty") {
		t.Errorf("empty key file: %s", r)
	}
}

// TestServeKeyAndUnix: a non-loopback address is served with the key from
// the environment; the Unix socket answers too.
func TestServeKeyAndUnix(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	sock := filepath.Join(tmp, "api.sock")
	cmd := child("serve", "--index", filepath.Join(tmp, "idx"), "--listen", "", "--unix", sock)
	cmd.Env = append(cmd.Env, serveKeyEnv+"=k3y")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	var resp *http.Response
	var err error
	for range 200 {
		if resp, err = c.Get("http://anna/v1/stats"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("unix socket: %v\n%s", err, stderr.String())
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("no key over the socket: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", "http://anna/v1/stats", nil)
	req.Header.Set("Authorization", "Bearer k3y")
	if resp, err = c.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("with the key: %v %v", resp, err)
	}
	resp.Body.Close()
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode: %v %v", fi, err)
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Errorf("SIGINT: %v\n%s", err, stderr.String())
	}
}

// TestCrashServe kills `annactl serve` with SIGKILL while a client writes
// batches, and checks that every acknowledged batch is in the store and
// that the directory checks clean once reopened.
func TestCrashServe(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	rng := rand.New(rand.NewSource(3))
	rounds := max(3, crashRounds()/10)
	var tally crashTally
	for round := range rounds {
		dir := filepath.Join(tmp, fmt.Sprintf("r%d", round))
		cmd, url, log := serveChild(t, "--index", dir)
		var mu sync.Mutex
		var acked []int // first IDs of acknowledged batches of 4
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 400; i += 4 {
				select {
				case <-stop:
					return
				default:
				}
				if !postDocs(url, i, i+4) {
					return
				}
				mu.Lock()
				acked = append(acked, i)
				mu.Unlock()
			}
		}()
		// Kill once writes flow (the model loads with the first one), at a
		// random point of the batches that follow.
		for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(5 * time.Millisecond) {
			if n, _ := ackedCount(&mu, &acked); n > 0 {
				break
			}
		}
		time.Sleep(time.Duration(rng.Intn(400)) * time.Millisecond)
		cmd.cmd.Process.Kill()
		waitExit(t, cmd)
		close(stop)
		<-done
		tally.rounds++
		tally.killedMidway++
		got := storeDocs(t, dir)
		for _, first := range acked {
			for i := first; i < first+4; i++ {
				if _, ok := got[fmt.Sprintf("d%03d", i)]; !ok {
					tally.lost++
					t.Errorf("round %d: acknowledged document d%03d lost (%s)", round, i, log)
				}
			}
		}
		// Reopen for writing (replays what the indexes missed), then check.
		if e, err := engine.Open(context.Background(), dir, engine.Options{}); err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		} else {
			e.Close()
		}
		if !verifyDir(t, dir, len(got)) {
			tally.checksFailed++
		}
		t.Logf("round %d: %d batches acknowledged, %d documents stored", round, len(acked), len(got))
	}
	t.Logf("serve, SIGKILL during writes: %s", tally)
}

func ackedCount(mu *sync.Mutex, acked *[]int) (int, bool) {
	mu.Lock()
	defer mu.Unlock()
	return len(*acked), true
}
