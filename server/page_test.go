package server

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
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

// pageDocs are the documents of the page tests: metadata to filter on.
const pageDocs = `{"documents": [
 {"id": "sourdough", "title": "Sourdough", "text": "Wild yeast bread.\nFeed the starter daily.\nBake at 250 degrees.", "metadata": {"shelf": "baking", "year": 2021}},
 {"id": "graphs", "title": "Graphs", "text": "Nearest neighbour graphs for vector search.", "metadata": {"shelf": "computing", "year": 2019}},
 {"id": "rye", "title": "Rye bread", "text": "Rye bread with a sour starter.", "metadata": {"shelf": "baking", "year": 2018}}
]}`

// runChromium loads u headless and returns the DOM it drew (with extra
// flags, e.g. --screenshot, instead).
func runChromium(t *testing.T, bin, u string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=30000", "--window-size=1000,700"}
	if len(extra) == 0 {
		extra = []string{"--dump-dom"}
	}
	out, err := exec.CommandContext(ctx, bin, append(append(args, extra...), u)...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("chromium: %v\n%s", err, stderr)
	}
	return string(out)
}

// TestPageInChromium loads the search page in headless Chromium with a
// search in its address, and checks what it drew: the index's size and
// model, the modes offered (no rerank without a reranker), the metadata
// keys to filter on, the hits in order with highlighted snippets and
// explanations, the filter from the address applied. With
// ANNA_SCREENSHOT=FILE.png it also saves a screenshot (the docs').
func TestPageInChromium(t *testing.T) {
	bin := chromium(t)
	ts := newTestServer(t, Options{})
	if code, m := ts.do(t, "POST", "/v1/documents", pageDocs); code != 200 {
		t.Fatalf("add: %d %v", code, m)
	}
	u := ts.url + "/?q=" + url.QueryEscape("wild yeast bread") + "&explain=1"
	dom := runChromium(t, bin, u)
	hits := regexp.MustCompile(`<li class="hit" tabindex="0" data-id="([^"]*)">`).FindAllStringSubmatch(dom, -1)
	if len(hits) != 3 || hits[0][1] != "sourdough" {
		t.Fatalf("hits %v, want sourdough first of 3; the page:\n%s", hits, dom)
	}
	for _, want := range []string{`<mark>yeast</mark>`, `<mark>bread</mark>`, `lexical: rank 1`, `dense: rank`, `hits in`,
		`3 documents · model test-fp-0123 (32 dims) · fusion dbsf`, `<option value="shelf">shelf</option>`, `<option value="year">year (number)</option>`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %q:\n%s", want, dom)
		}
	}
	if strings.Contains(dom, `<option value="rerank">`) {
		t.Errorf("rerank offered without a reranker")
	}
	// The address's filter, mode and k.
	dom = runChromium(t, bin, ts.url+"/?q=bread&mode=lexical&k=1&filter="+url.QueryEscape(`{"shelf": "baking"}`))
	hits = regexp.MustCompile(`data-id="([^"]*)"`).FindAllStringSubmatch(dom, -1)
	if len(hits) != 1 || (hits[0][1] != "sourdough" && hits[0][1] != "rye") || !strings.Contains(dom, `shelf = baking`) {
		t.Errorf("lexical k=1 filtered to baking: %v\n%s", hits, dom)
	}
	// A folder's document says where in its file a hit lies.
	if code, m := ts.do(t, "POST", "/v1/documents", `{"documents": [{"id": "plan.pdf#3", "title": "Plan", "text": "The harvest plan for the orchard.", "metadata": {"path": "notes/plan.pdf", "page": 3}}]}`); code != 200 {
		t.Fatalf("add: %d %v", code, m)
	}
	dom = runChromium(t, bin, ts.url+"/?mode=lexical&q=harvest+plan")
	if !strings.Contains(dom, `<span class="loc">notes/plan.pdf:page 3</span>`) {
		t.Errorf("no location drawn:\n%s", dom)
	}
	if shot := os.Getenv("ANNA_SCREENSHOT"); shot != "" {
		abs, _ := filepath.Abs(shot)
		runChromium(t, bin, ts.url+"/?q="+url.QueryEscape("bread with a starter")+"&explain=1&filter="+url.QueryEscape(`{"shelf": "baking"}`), "--screenshot="+abs)
		t.Logf("screenshot: %s", abs)
	}
}

// harness drives the search page in a same-origin iframe, as a user would
// with the keyboard and the browser's back and forward, and writes what it
// saw into #report (the test reads it from the dumped DOM).
const harness = `<!doctype html><html><body><pre id="report">running</pre><iframe id="f" width="1000" height="700"></iframe>
<script>
"use strict";
const f = document.getElementById("f"), log = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const W = () => f.contentWindow, D = () => f.contentDocument, E = (id) => D().getElementById(id);
async function until(cond, what) {
  for (let i = 0; i < 300; i++) { try { if (cond()) return; } catch (e) {} await sleep(50); }
  throw new Error("timed out waiting for " + what);
}
const ids = () => [...D().querySelectorAll("li.hit")].map((li) => li.dataset.id);
const press = (k, target) => (target || D().activeElement || D().body).dispatchEvent(new KeyboardEvent("keydown", {key: k, bubbles: true, cancelable: true}));
const focused = () => D().activeElement && (D().activeElement.dataset.id || D().activeElement.id);
async function step(name, fn) {
  try { log.push({name, ok: true, got: await fn()}); } catch (e) { log.push({name, ok: false, err: String(e)}); }
}
const steps = {
  async search() {
    f.src = "/?q=" + encodeURIComponent("wild yeast bread");
    await until(() => ids().length > 0, "the first results");
    await step("first", () => ({ids: ids(), search: W().location.search}));
    E("q").value = "nearest neighbour graphs";
    E("form").requestSubmit();
    await step("typed", async () => { await until(() => ids()[0] === "graphs" && W().location.search.includes("nearest"), "the typed search"); return W().location.search; });
    await step("keys", async () => {
      press("/", D().body); const slash = focused(); press("Escape");
      press("j", D().body); const j1 = focused(); press("j"); const j2 = focused(); press("k"); const k1 = focused();
      return [slash, j1, j2, k1];
    });
    await step("open", async () => {
      press("Enter");
      await until(() => E("doc").classList.contains("show") && E("doctitle").textContent === "Graphs", "the document");
      return {search: W().location.search, meta: E("docmeta").textContent, where: E("where").textContent, match: E("match") && E("match").textContent};
    });
    await step("escape", async () => {
      press("Escape");
      await until(() => !E("doc").classList.contains("show") && !W().location.search.includes("doc="), "the results again");
      return {search: W().location.search, ids: ids()};
    });
    await step("back", async () => {
      W().history.back();
      await until(() => E("q").value === "wild yeast bread" && ids()[0] === "sourdough", "the first search");
      return W().location.search;
    });
    await step("forward", async () => {
      W().history.forward();
      await until(() => E("q").value === "nearest neighbour graphs" && ids()[0] === "graphs", "the second search");
      return W().location.search;
    });
    await step("pick", async () => {
      E("q").value = "bread"; E("fkey").value = "shelf"; E("fkey").dispatchEvent(new Event("change"));
      await until(() => E("fvalue"), "the values");
      const values = [...E("fvalue").options].map((o) => o.value);
      E("fvalue").value = "baking"; E("fadd").click();
      await until(() => W().location.search.includes("filter=") && ids().length === 2, "the filtered search");
      return {values, ids: ids().sort(), chips: E("chips").textContent, filter: new URLSearchParams(W().location.search).get("filter")};
    });
    await step("raw", async () => {
      E("raw").value = '{"gte": {"year": 2020}}'; E("form").requestSubmit();
      await until(() => ids().length === 1, "the raw filter");
      return {ids: ids(), chips: E("chips").textContent};
    });
  },
  async asked() {
    f.src = "/?q=bread";
    await until(() => E("keyrow").classList.contains("show"), "the key prompt");
    await step("prompt", () => E("keymsg").textContent);
    E("key").value = "the-key"; E("keysave").click();
    await step("key", async () => { await until(() => ids().length > 0, "results with the key"); return {ids: ids().length, stats: E("stats").textContent}; });
  },
  async hash() {
    f.src = "/?q=bread#key=the-key";
    await step("hash", async () => { await until(() => ids().length > 0, "results with the key"); return {ids: ids().length, hash: W().location.hash}; });
  },
  async rerank() {
    f.src = "/?q=bread";
    await step("rerank", async () => { await until(() => ids().length > 0, "results"); return {modes: [...E("mode").options].map((o) => o.value)}; });
  },
};
(async () => {
  try { await steps[new URLSearchParams(location.search).get("run")](); } catch (e) { log.push({name: "harness", ok: false, err: String(e)}); }
  document.getElementById("report").textContent = JSON.stringify(log);
})();
</script></body></html>`

type harnessStep struct {
	Name string          `json:"name"`
	OK   bool            `json:"ok"`
	Got  json.RawMessage `json:"got"`
	Err  string          `json:"err"`
}

// drive runs the harness's steps named run against srv in Chromium.
func drive(t *testing.T, bin string, srv http.Handler, run string) map[string]json.RawMessage {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/harness.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(harness))
	})
	mux.Handle("/", srv)
	hs := httptest.NewServer(mux)
	defer hs.Close()
	dom := runChromium(t, bin, hs.URL+"/harness.html?run="+run)
	m := regexp.MustCompile(`(?s)<pre id="report">(.*?)</pre>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no report:\n%s", dom)
	}
	var steps []harnessStep
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &steps); err != nil {
		t.Fatalf("report %q: %v", m[1], err)
	}
	got := map[string]json.RawMessage{}
	for _, s := range steps {
		if !s.OK {
			t.Errorf("%s: %s", s.Name, s.Err)
			continue
		}
		got[s.Name] = s.Got
	}
	return got
}

// TestPageDriven: the page used as a person would, in Chromium: a typed
// search goes into the address; / focuses the search box, j and k move
// through the hits, Enter opens one (its text, metadata and where the
// match is), Esc goes back to the list; the browser's back and forward
// bring the searches back; a filter picked from the metadata keys (and one
// typed as JSON) narrows the hits; an API key asked for, or given once in
// the address's #key=, is used; rerank is offered with a reranker.
func TestPageDriven(t *testing.T) {
	bin := chromium(t)
	ts := newTestServer(t, Options{})
	if code, m := ts.do(t, "POST", "/v1/documents", pageDocs); code != 200 {
		t.Fatalf("add: %d %v", code, m)
	}
	got := drive(t, bin, ts.srv, "search")
	check := func(name string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(string(got[name]), w) {
				t.Errorf("%s: %s lacks %s", name, got[name], w)
			}
		}
	}
	check("first", `"ids":["sourdough"`, `q=wild+yeast+bread`)
	check("typed", `q=nearest+neighbour+graphs`)
	check("keys", `["q","graphs","`) // "/" focused the box; j the first hit, j the second, k the first again
	if !strings.HasSuffix(string(got["keys"]), `","graphs"]`) {
		t.Errorf("keys: %s (k should come back to the first hit)", got["keys"])
	}
	check("open", `doc=graphs`, `computing`, `the match: lines 1–1, bytes 0–`, `"match":"Nearest neighbour graphs`)
	check("escape", `"ids":["graphs"`)
	if strings.Contains(string(got["escape"]), "doc=") {
		t.Errorf("escape: %s", got["escape"])
	}
	check("back", `q=wild+yeast+bread`)
	check("forward", `q=nearest+neighbour+graphs`)
	check("pick", `"values":["baking","computing"]`, `"ids":["rye","sourdough"]`, `shelf = baking`, `"filter":"{\"shelf\":\"baking\"}"`)
	check("raw", `"ids":["sourdough"]`, `year ≥ 2020`)

	keyed := newTestServer(t, Options{APIKey: "the-key"})
	if code, m := keyed.do(t, "POST", "/v1/documents", pageDocs, "Authorization", "Bearer the-key"); code != 200 {
		t.Fatalf("add: %d %v", code, m)
	}
	got = drive(t, bin, keyed.srv, "asked")
	check("prompt", `wants an API key`)
	check("key", `"ids":3`, `3 documents`)
	got = drive(t, bin, keyed.srv, "hash")
	check("hash", `"ids":3`, `"hash":""`)

	rr := newTestServer(t, Options{Reranker: &fakeReranker{}, RerankerName: "fake"})
	if code, m := rr.do(t, "POST", "/v1/documents", pageDocs); code != 200 {
		t.Fatalf("add: %d %v", code, m)
	}
	got = drive(t, bin, rr.srv, "rerank")
	check("rerank", `"modes":["lexical","dense","hybrid","rerank"]`)
}
