package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/anna-search/anna/engine/internal/share"
	"github.com/anna-search/anna/internal/encodertest"
	"github.com/anna-search/anna/internal/fuzzcheck"
)

// shareMethods are the methods a writer answers on anna.sock.
var shareMethods = []string{"hello", "search", "retrieve", "snippets", "get", "vectors", "stats", "lexical-scores", "check"}

// FuzzShareProtocol: the cross-process socket protocol from both ends.
// A writer (a hashing encoder, a few documents) answers any request body
// to any of its methods within a bound with 200 and an envelope holding
// a result or an error, never a panic, and stays usable; and a reader
// decodes any answer into a result or an error (errors.Is and errors.As
// work on it), never a panic.
func FuzzShareProtocol(f *testing.F) {
	dir := filepath.Join(f.TempDir(), "idx")
	e, err := Open(context.Background(), dir, Options{Encoder: &encodertest.Hashing{D: 16, FP: "fp-fuzz"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { e.Close() })
	var docs []Document
	for i := range 30 {
		docs = append(docs, Document{ID: fmt.Sprint("d", i), Title: fmt.Sprint("title ", i), Text: fmt.Sprintf("tok%d shared words", i), Meta: map[string]string{"p": fmt.Sprint(i % 2)}})
	}
	if _, err := e.Add(context.Background(), docs); err != nil {
		f.Fatal(err)
	}
	sock := filepath.Join(dir, sockFile)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	for i, body := range []string{`{"Wait": false}`, `{"Query": "shared", "Opts": {"K": 3, "Mode": "hybrid", "Filter": {"p": "1"}}}`,
		`{"Query": "tok3", "Opts": {"K": 2, "Mode": "rerank"}}`, `{"Query": "tok", "Results": [{"ID": "d1"}], "Passage": {"d1": 0}, "Size": 50}`,
		`{"IDs": ["d1", "nope"]}`, `{"IDs": ["d2"]}`, `{}`, `{"Query": "shared", "Docs": [{"ID": "x", "Text": "shared words"}]}`, `{}`} {
		f.Add(uint8(i), []byte(body), []byte(`{"Result": {"Proto": 1}}`))
	}
	f.Fuzz(func(t *testing.T, which uint8, req, answer []byte) {
		method := shareMethods[int(which)%len(shareMethods)]
		fuzzcheck.Within(t, 20*time.Second, method, func() {
			resp, err := hc.Post("http://anna/v1/"+method, "application/json", bytes.NewReader(req))
			if err != nil {
				t.Errorf("%s: %v", method, err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var env share.Envelope
			if resp.StatusCode != 200 || json.Unmarshal(b, &env) != nil || (env.Error == nil) == (env.Result == nil) {
				t.Errorf("%s %q: answered %d %q", method, req, resp.StatusCode, b)
			}
		})
		if _, err := e.Stats(); err != nil {
			t.Fatalf("the writer after %s %q: %v", method, req, err)
		}
		// The reader's end: any answer decodes to a result or an error.
		var env share.Envelope
		if err := json.Unmarshal(answer, &env); err != nil || env.Error == nil {
			return
		}
		werr := wireCodec{}.Decode(env.Error)
		_ = werr.Error()
		errors.Is(werr, ErrClosed)
		errors.Is(werr, errGone)
		var oe *OptionError
		var re *RecoveryError
		var me *ModelMismatchError
		if errors.As(werr, &oe) {
			_ = oe.Error()
		}
		if errors.As(werr, &re) {
			_ = re.Error()
		}
		if errors.As(werr, &me) {
			_ = me.Error()
		}
	})
}
