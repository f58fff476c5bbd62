package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// attackPage is a page of another origin that tries what a web page can
// against a key-less server on 127.0.0.1 (TARGET): writes without a
// preflight (fetch no-cors with a Blob of no type, with text/plain, a
// text/plain form, a beacon), a write and a read with CORS, and — served
// through the attacker's "rebinding" proxy — a same-origin write and read
// by a name that resolves to 127.0.0.1. Each outcome becomes an <li>.
const attackPage = `<!doctype html>
<title>attack</title>
<ul id="out"></ul>
<iframe name="sink"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink" action="TARGET/v1/documents"><input name='{"documents": [{"id": "form", "text": "planted by a form", "x": "' value='"}]}'></form>
<script>
const T = "TARGET";
const out = (name, what) => {
  const li = document.createElement("li");
  li.id = name;
  li.textContent = name + ": " + what;
  document.getElementById("out").appendChild(li);
};
const doc = id => JSON.stringify({documents: [{id, text: "planted by " + id}]});
async function attempt(name, f) {
  try { out(name, await f()); } catch (e) { out(name, "failed: " + e.name); }
}
(async () => {
  await attempt("blob", async () => { const r = await fetch(T + "/v1/documents", {method: "POST", mode: "no-cors", body: new Blob([doc("blob")])}); return "sent, " + r.type; });
  await attempt("text", async () => { const r = await fetch(T + "/v1/documents", {method: "POST", mode: "no-cors", body: doc("text")}); return "sent, " + r.type; });
  await attempt("beacon", async () => "queued " + navigator.sendBeacon(T + "/v1/documents", doc("beacon")));
  await attempt("cors-write", async () => { const r = await fetch(T + "/v1/documents", {method: "POST", headers: {"Content-Type": "application/json"}, body: doc("cors-write")}); return "status " + r.status; });
  await attempt("cors-read", async () => { const r = await fetch(T + "/v1/stats"); return "read " + (await r.text()); });
  await attempt("rebound-write", async () => { const r = await fetch("/v1/documents", {method: "POST", headers: {"Content-Type": "application/json"}, body: doc("rebound-write")}); return "status " + r.status; });
  await attempt("rebound-read", async () => { const r = await fetch("/v1/stats"); return "status " + r.status + " " + (await r.text()).slice(0, 60); });
  document.getElementById("f").submit();
  await new Promise(r => setTimeout(r, 1500));
  out("done", "all tried");
})();
</script>`

// TestAttackPageInChromium: issue 61's fourth item in a browser. Headless
// Chromium opens a page of another origin (attacker.test, which Chromium
// resolves to 127.0.0.1) that attacks the server every way a page can;
// no document is planted and nothing is read. The "rebinding" is the
// attacker's server passing the page's same-origin requests on to anna
// with their Host unchanged: what anna sees after a DNS rebinding.
func TestAttackPageInChromium(t *testing.T) {
	bin := chromium(t)
	ts := newTestServer(t, Options{})
	if code, m := ts.do(t, "POST", "/v1/documents", testDocs); code != 200 {
		t.Fatalf("add: %d %v", code, m)
	}
	anna, _ := url.Parse(ts.url)
	proxy := httputil.NewSingleHostReverseProxy(anna)
	director := proxy.Director
	proxy.Director = func(r *http.Request) {
		host := r.Host
		director(r)
		r.Host = host // as a rebound name reaches 127.0.0.1: Host is the attacker's
	}
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte(strings.ReplaceAll(attackPage, "TARGET", ts.url)))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer attacker.Close()
	au, _ := url.Parse(attacker.URL)
	page := "http://attacker.test:" + au.Port() + "/"

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=15000", "--host-resolver-rules=MAP attacker.test 127.0.0.1",
		"--dump-dom", page).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("chromium: %v\n%s", err, stderr)
	}
	dom := string(out)
	results := map[string]string{}
	for _, m := range regexp.MustCompile(`<li id="([^"]+)">[^:]*: ([^<]*)</li>`).FindAllStringSubmatch(dom, -1) {
		results[m[1]] = m[2]
	}
	t.Logf("the page's attempts: %v", results)
	if results["done"] == "" {
		t.Fatalf("the page did not finish:\n%s", dom)
	}
	for _, id := range []string{"blob", "text", "beacon", "form", "cors-write", "rebound-write"} {
		if got, _ := ts.eng.Get(t.Context(), id); len(got) != 0 {
			t.Errorf("the page planted document %q (%s)", id, results[id])
		}
	}
	for name, want := range map[string]string{
		"cors-write":    "failed",     // the preflight is refused
		"cors-read":     "failed",     // no CORS header: the browser withholds the answer
		"rebound-write": "status 403", // Host is not the server's
		"rebound-read":  "status 403",
	} {
		if !strings.HasPrefix(results[name], want) {
			t.Errorf("%s: %q, want %q", name, results[name], want)
		}
	}
	if strings.Contains(results["rebound-read"], `"documents"`) {
		t.Errorf("the rebound page read the stats: %s", results["rebound-read"])
	}
}
