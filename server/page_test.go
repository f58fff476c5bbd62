package server

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium returns the headless browser `make test` installs
// (scripts/chromium.sh), or skips.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("skipping the browser test: chromium not installed (make chromium, or scripts/chromium.sh)")
	return ""
}

// TestPageInChromium loads the search page in headless Chromium with a
// query in its URL, lets its script search, and checks the results it
// drew: the hits in order, the highlighted snippet, the explanation.
// With ANNA_SCREENSHOT=FILE.png it also saves a screenshot (the docs').
func TestPageInChromium(t *testing.T) {
	bin := chromium(t)
	ts := newTestServer(t, Options{})
	if code, m := ts.do(t, "POST", "/v1/documents", testDocs); code != 200 {
		t.Fatalf("add: %d %v", code, m)
	}
	u := ts.url + "/?q=" + url.QueryEscape("wild yeast bread")
	run := func(extra ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
			"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=10000", "--window-size=1000,620"}, extra...)
		out, err := exec.CommandContext(ctx, bin, append(args, u)...).Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("chromium: %v\n%s", err, stderr)
		}
		return string(out)
	}
	dom := run("--dump-dom")
	hits := regexp.MustCompile(`<li class="hit"><span class="title">([^<]*)</span>`).FindAllStringSubmatch(dom, -1)
	if len(hits) == 0 {
		t.Fatalf("no hits drawn; the page:\n%s", dom)
	}
	if hits[0][1] != "Sourdough" {
		t.Errorf("first hit %q, want Sourdough", hits[0][1])
	}
	for _, want := range []string{`<mark>yeast</mark>`, `<mark>Bread</mark>`, `lexical: rank 1`, `dense: rank`, `hits in`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %q:\n%s", want, dom)
		}
	}
	if shot := os.Getenv("ANNA_SCREENSHOT"); shot != "" {
		abs, _ := filepath.Abs(shot)
		run("--screenshot=" + abs)
		t.Logf("screenshot: %s", abs)
	}
}
