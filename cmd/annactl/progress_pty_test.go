package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// onTerminal runs annactl as a child whose stderr is a terminal (a
// pseudo-terminal), where the progress line is shown, and returns what it
// printed there, with the terminal's "\r\n" read back as "\n". It skips the
// test where no pseudo-terminal can be opened.
func onTerminal(t *testing.T, args ...string) string {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("no pseudo-terminal: unlock: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	cmd := child(args...)
	cmd.Stderr, cmd.Stdout = slave, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		io.Copy(&out, master) // ends with EIO once the child has exited
		close(done)
	}()
	werr := cmd.Wait()
	<-done
	s := strings.ReplaceAll(out.String(), "\r\n", "\n")
	if werr != nil {
		t.Fatalf("annactl %s: %v\n%q", strings.Join(args, " "), werr, s)
	}
	return s
}

// TestIndexProgressOnTerminal: the progress line shows at once, before the
// first batch is embedded, and counts against the input's lines.
func TestIndexProgressOnTerminal(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	corpus := writeCorpus(t, tmp, 36, 20, 5)
	out := onTerminal(t, "index", "--index", filepath.Join(tmp, "idx"), "--batch", "4", corpus)
	first, _, _ := strings.Cut(strings.TrimPrefix(out, "\r\x1b[K"), "\r")
	if !strings.Contains(first, "indexing "+corpus+": 0/36 (0%)") || !strings.Contains(first, "reading and embedding the first 4 documents") {
		t.Errorf("first progress line %q\nall: %q", first, out)
	}
	if !strings.Contains(out, ": 36/36 (100%)") || !regexp.MustCompile(`\n(\r\x1b\[K)?indexed `).MatchString(out) {
		t.Errorf("progress %q", out)
	}
}

// TestReindexMessagesOnTheirOwnLine: what the engine says during a reindex
// ("dense graph: built ...") starts a line of its own instead of running on
// after the progress count.
func TestReindexMessagesOnTheirOwnLine(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "idx")
	mustRun(t, "index", "--index", dir, writeCorpus(t, tmp, 12, 20, 6))
	out := onTerminal(t, "reindex", "--index", dir, "--chunk-tokens", "128", "--batch", "4")
	i := strings.Index(out, "dense graph: built")
	if i < 0 {
		t.Fatalf("no message from the engine: %q", out)
	}
	if i > 0 && out[i-1] != '\n' {
		t.Errorf("the engine's message runs on after the progress line: %q", out)
	}
	if strings.Contains(out, "\n\n") {
		t.Errorf("an empty line: %q", out)
	}
}
