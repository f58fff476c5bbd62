package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRemoteModel: annactl index --model URL#NAME embeds through another
// anna's /v1/embeddings (annactl serve): the dense results are those of
// the same model run here; the index reopens with the recorded model, and
// refuses another name for it or a local model.
func TestRemoteModel(t *testing.T) {
	needModel(t)
	tmp := t.TempDir()
	corpus := writeCorpus(t, tmp, 40, 12, 7)
	// The server embeds with the default model (its int8 form), as does
	// the local index it is compared with.
	sv, url, log := serveChild(t, "--index", filepath.Join(tmp, "server"))
	defer func() {
		sv.cmd.Process.Signal(syscall.SIGTERM)
		if code := waitExit(t, sv); code != 0 {
			t.Errorf("serve exited %d\n%s", code, log)
		}
	}()
	remote, local := filepath.Join(tmp, "remote"), filepath.Join(tmp, "local")
	spec := url + "/v1#all-MiniLM-L6-v2-int8"
	mustRun(t, "index", "--index", remote, "--model", spec, "--cache=false", corpus)
	mustRun(t, "index", "--index", local, "--cache=false", corpus)
	top := func(dir string) []string {
		t.Helper()
		r := mustRun(t, "search", "--index", dir, "--mode", "dense", "-k", "5", "--json", "graph3 search12 vector7")
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var h struct{ ID string }
			json.Unmarshal([]byte(line), &h)
			ids = append(ids, h.ID)
		}
		return ids
	}
	if a, b := top(remote), top(local); strings.Join(a, " ") != strings.Join(b, " ") {
		t.Errorf("dense top 5 through the server %v, here %v", a, b)
	}
	st, _ := statsOf(t, remote)
	if st.ModelName != "all-MiniLM-L6-v2-int8" || st.Dim != 384 || st.ModelDir != spec {
		t.Errorf("recorded model %q, dim %d, at %q", st.ModelName, st.Dim, st.ModelDir)
	}
	// Reopened without --model: the recorded server and name.
	extra := filepath.Join(tmp, "extra.jsonl")
	os.WriteFile(extra, []byte(`{"_id": "x1", "text": "tides follow the moon"}`+"\n"), 0o644)
	mustRun(t, "index", "--index", remote, "--cache=false", extra)
	// Another name at the same server is another model.
	if r := annactl(t, "", "index", "--index", remote, "--model", url+"/v1#text-embedding-3-small", extra); r.code == 0 || !strings.Contains(r.stderr, "text-embedding-3-small") {
		t.Errorf("another remote model: %s", r)
	}
	if r := annactl(t, "", "index", "--index", remote, "--model", needModel(t), extra); r.code == 0 || !strings.Contains(r.stderr, "reindex") {
		t.Errorf("a local model on a remote model's index: %s", r)
	}
	if r := annactl(t, "", "index", "--index", remote, "--precision", "int8", extra); r.code != 2 || !strings.Contains(r.stderr, "another server") {
		t.Errorf("--precision on a remote model's index: %s", r)
	}
	if r := annactl(t, "", "index", "--index", filepath.Join(tmp, "bad"), "--model", "http://127.0.0.1:1/v1#m", extra); r.code == 0 || !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Errorf("a server that is not there: %s", r)
	}
}
