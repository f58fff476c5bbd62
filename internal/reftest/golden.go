package reftest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anna-search/anna/internal/model/safetensors"
	"github.com/anna-search/anna/internal/pyref"
)

// Env is the environment variable that switches the suites from reading
// their golden files to regenerating them: ANNA_GOLDENS=update runs each
// suite's tool and rewrites its golden file (`make goldens`).
const Env = "ANNA_GOLDENS"

// Regenerate is the command that remakes every golden file.
const Regenerate = "make goldens"

// goldenLimit bounds what a golden file may unpack to: they are a few
// hundred kilobytes; a larger one is a mistake, not a reference.
const goldenLimit = 32 << 20

// Suite is a reference that a Python tool under tools/ computes from the
// inputs a test writes, committed as a golden file.
type Suite struct {
	// Golden is the golden file's path, relative to the test's package
	// (the working directory of `go test`): testdata/NAME.golden.
	Golden string
	// Tool is the script under tools/.
	Tool string
	// Imports are the modules the venv must import to run it.
	Imports []string
	// Outputs are the files the tool writes into each case's folder;
	// grads.safetensors when empty.
	Outputs []string
	// Args gives the tool's arguments for the cases' folders, in order;
	// the folders themselves when nil (one process serves every case).
	Args func(dirs []string) []string
}

// Case is one comparison: a name (unique in its suite, used as a subtest's
// and a golden member's name) and the folder holding its inputs, where
// Reference puts the tool's outputs.
type Case struct {
	Name, Dir string
}

// Check compares one case with the reference outputs in its folder.
type Check func(t *testing.T, dir string)

// Run prepares n cases, each in a fresh folder (prepare writes the case's
// inputs there and returns its name and its check), puts the reference's
// outputs beside the inputs (Reference) and runs every check as a subtest
// named after its case.
func (s Suite) Run(t *testing.T, n int, prepare func(t *testing.T, i int, dir string) (name string, check Check)) {
	t.Helper()
	cases := make([]Case, n)
	checks := make([]Check, n)
	for i := range n {
		dir := t.TempDir()
		name, check := prepare(t, i, dir)
		cases[i], checks[i] = Case{Name: name, Dir: dir}, check
	}
	s.Reference(t, cases)
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) { checks[i](t, c.Dir) })
	}
}

// Reference puts the tool's outputs for every case into the case's folder:
// from the golden file, failing tb when the file is missing or stale (the
// tool or a case's inputs changed since it was made), or, under
// ANNA_GOLDENS=update, by running the tool in the venv and rewriting the
// golden file.
func (s Suite) Reference(tb testing.TB, cases []Case) {
	tb.Helper()
	seen := map[string]bool{}
	for _, c := range cases {
		if !validName(c.Name) || seen[c.Name] {
			tb.Fatalf("reftest: case name %q is empty, repeated or not a plain file name", c.Name)
		}
		seen[c.Name] = true
	}
	sources, err := toolSources(pyref.Tool(tb, s.Tool))
	if err != nil {
		tb.Fatal(err)
	}
	m := manifest{Tool: s.Tool, Sources: sources}
	for _, c := range cases {
		in, err := hashInputs(c.Dir)
		if err != nil {
			tb.Fatal(err)
		}
		m.Cases = append(m.Cases, manifestCase{Name: c.Name, Inputs: in, Outputs: s.outputs()})
	}
	switch mode := os.Getenv(Env); mode {
	case "":
		s.load(tb, cases, m)
	case "update":
		s.update(tb, cases, m)
	default:
		tb.Fatalf("reftest: %s=%q: want update (regenerate the golden files) or nothing", Env, mode)
	}
}

func (s Suite) outputs() []string {
	if len(s.Outputs) == 0 {
		return []string{"grads.safetensors"}
	}
	return s.Outputs
}

// manifest is a golden file's table of contents: what made it and from
// which inputs.
type manifest struct {
	Tool     string            `json:"tool"`
	Sources  map[string]string `json:"sources"` // tools/ file → SHA-256: the tool and what it imports or runs
	MadeWith string            `json:"made_with,omitempty"`
	Cases    []manifestCase    `json:"cases"`
}

type manifestCase struct {
	Name    string            `json:"name"`
	Inputs  map[string]string `json:"inputs"` // file in the case's folder → SHA-256
	Outputs []string          `json:"outputs"`
}

// load checks the golden file against the test's manifest and copies the
// outputs into the cases' folders.
func (s Suite) load(tb testing.TB, cases []Case, want manifest) {
	tb.Helper()
	got, files, err := readGolden(s.Golden)
	if errors.Is(err, fs.ErrNotExist) {
		tb.Fatalf("%s: no golden file: make it with `%s` (needs `make pydeps`)", s.Golden, Regenerate)
	}
	if err != nil {
		tb.Fatalf("%s: %v", s.Golden, err)
	}
	if stale := staleness(got, want); len(stale) > 0 {
		if len(stale) > 12 {
			stale = append(stale[:12], fmt.Sprintf("and %d more", len(stale)-12))
		}
		tb.Fatalf("%s (made with %s) is stale: %s; regenerate it with `%s` (needs `make pydeps`)",
			s.Golden, got.MadeWith, strings.Join(stale, "; "), Regenerate)
	}
	for _, c := range cases {
		for _, o := range s.outputs() {
			b, ok := files[c.Name+"/"+o]
			if !ok {
				tb.Fatalf("%s: case %s has no %s (regenerate it with `%s`)", s.Golden, c.Name, o, Regenerate)
			}
			if err := os.WriteFile(filepath.Join(c.Dir, o), b, 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// staleness lists how the golden file's manifest differs from the test's:
// the tool's sources, the cases and each case's inputs.
func staleness(got, want manifest) []string {
	var out []string
	if got.Tool != want.Tool {
		out = append(out, fmt.Sprintf("it was made by %s, not %s", got.Tool, want.Tool))
	}
	for _, f := range diffHashes(got.Sources, want.Sources) {
		out = append(out, "tools/"+f)
	}
	had := map[string]manifestCase{}
	for _, c := range got.Cases {
		had[c.Name] = c
	}
	for _, c := range want.Cases {
		g, ok := had[c.Name]
		delete(had, c.Name)
		if !ok {
			out = append(out, fmt.Sprintf("case %s is new", c.Name))
			continue
		}
		if d := diffHashes(g.Inputs, c.Inputs); len(d) > 0 {
			out = append(out, fmt.Sprintf("case %s's inputs %s", c.Name, strings.Join(d, ", ")))
		}
		if !slices.Equal(g.Outputs, c.Outputs) {
			out = append(out, fmt.Sprintf("case %s's outputs are %v, not %v", c.Name, c.Outputs, g.Outputs))
		}
	}
	var gone []string
	for name := range had {
		gone = append(gone, name)
	}
	sort.Strings(gone)
	for _, name := range gone {
		out = append(out, fmt.Sprintf("case %s is no longer tested", name))
	}
	return out
}

// diffHashes names each file whose hash differs: "f changed", "f is new",
// "f is gone".
func diffHashes(old, now map[string]string) []string {
	var out []string
	for _, f := range sortedKeys(now) {
		h, ok := old[f]
		switch {
		case !ok:
			out = append(out, f+" is new")
		case h != now[f]:
			out = append(out, f+" changed")
		}
	}
	for _, f := range sortedKeys(old) {
		if _, ok := now[f]; !ok {
			out = append(out, f+" is gone")
		}
	}
	return out
}

// update runs the tool over every case, writes the golden file and logs
// how its outputs moved.
func (s Suite) update(tb testing.TB, cases []Case, m manifest) {
	tb.Helper()
	python, err := pyref.Find(s.Imports...)
	if err != nil {
		tb.Fatalf("%s=update needs the Python references: %v", Env, err)
	}
	dirs := make([]string, len(cases))
	for i, c := range cases {
		dirs[i] = c.Dir
	}
	args := dirs
	if s.Args != nil {
		args = s.Args(dirs)
	}
	t0 := time.Now()
	if out, err := exec.Command(python, append([]string{pyref.Tool(tb, s.Tool)}, args...)...).CombinedOutput(); err != nil {
		tb.Fatalf("%s: %v\n%s", s.Tool, err, out)
	}
	m.MadeWith = madeWith(python, s.Imports)
	files := map[string][]byte{}
	for _, c := range cases {
		for _, o := range s.outputs() {
			b, err := os.ReadFile(filepath.Join(c.Dir, o))
			if err != nil {
				tb.Fatalf("%s wrote no %s for case %s: %v", s.Tool, o, c.Name, err)
			}
			files[c.Name+"/"+o] = b
		}
	}
	old, oldFiles, err := readGolden(s.Golden)
	if err == nil && staleness(old, m) == nil && old.MadeWith == m.MadeWith && sameFiles(oldFiles, files) {
		tb.Logf("%s: unchanged (%s ran in %v)", s.Golden, s.Tool, time.Since(t0).Round(time.Millisecond))
		return
	}
	if err == nil {
		for _, name := range sortedKeys(files) {
			if d := describeChange(oldFiles[name], files[name]); d != "" {
				tb.Logf("%s: %s %s", s.Golden, name, d)
			}
		}
	}
	b, err := writeGolden(m, files)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(s.Golden), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(s.Golden, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("%s: written, %d cases, %d bytes (%s ran in %v; %s)", s.Golden, len(cases), len(b), s.Tool,
		time.Since(t0).Round(time.Millisecond), m.MadeWith)
}

func sameFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// describeChange says how a regenerated output differs from the one in the
// golden file: "" when it is the same, the largest relative difference of
// its tensors for a safetensors file.
func describeChange(old, now []byte) string {
	switch {
	case old == nil:
		return "is new"
	case bytes.Equal(old, now):
		return ""
	}
	a, errA := safetensors.Read(bytes.NewReader(old), int64(len(old)))
	b, errB := safetensors.Read(bytes.NewReader(now), int64(len(now)))
	if errA != nil || errB != nil {
		return "changed"
	}
	worst, worstName := 0.0, ""
	for name, t := range b {
		o, ok := a[name]
		if !ok || len(o.Data) != len(t.Data) {
			return "changed: tensor " + name + " is new or reshaped"
		}
		if rel, _ := RelErr(t.Data, o.Data, 0); rel > worst {
			worst, worstName = rel, name
		}
	}
	return fmt.Sprintf("changed: largest relative difference %.3g (%s)", worst, worstName)
}

// madeWith describes the interpreter and the distributions of imports,
// for the manifest ("" when Python cannot say).
func madeWith(python string, imports []string) string {
	var roots []string
	for _, imp := range imports {
		r, _, _ := strings.Cut(imp, ".")
		if !slices.Contains(roots, r) {
			roots = append(roots, r)
		}
	}
	q, _ := json.Marshal(roots)
	script := "import sys, json, importlib.metadata as m\n" +
		"out = ['Python ' + sys.version.split()[0]]\n" +
		"for r in json.loads(sys.argv[1]):\n" +
		"    try:\n        out.append(r + ' ' + m.version(r))\n" +
		"    except Exception:\n        pass\n" +
		"print(', '.join(out))\n"
	out, err := exec.Command(python, "-c", script, string(q)).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// readGolden unpacks a golden file.
func readGolden(name string) (manifest, map[string][]byte, error) {
	var m manifest
	f, err := os.Open(name)
	if err != nil {
		return m, nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return m, nil, fmt.Errorf("not a golden file (gzip): %w", err)
	}
	tr := tar.NewReader(io.LimitReader(zr, goldenLimit))
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return m, nil, fmt.Errorf("not a golden file (tar): %w", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return m, nil, fmt.Errorf("reading %s: %w", h.Name, err)
		}
		files[h.Name] = b
	}
	mj, ok := files["manifest.json"]
	if !ok {
		return m, nil, errors.New("no manifest.json in the golden file")
	}
	delete(files, "manifest.json")
	if err := json.Unmarshal(mj, &m); err != nil {
		return m, nil, fmt.Errorf("manifest.json: %w", err)
	}
	return m, files, nil
}

// writeGolden packs the manifest and files (names sorted, no times or
// owners) so that the same content gives the same bytes.
func writeGolden(m manifest, files map[string][]byte) ([]byte, error) {
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := add("manifest.json", append(mj, '\n')); err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(files) {
		if err := add(name, files[name]); err != nil {
			return nil, err
		}
	}
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// hashInputs hashes every file in dir (the folder is flat), JSON files in
// a canonical form.
func hashInputs(dir string) (map[string]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("reftest: %s: %s is not a plain file (a case's inputs are a flat folder)", dir, e.Name())
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(e.Name(), ".json") {
			if b, err = canonicalJSON(b); err != nil {
				return nil, fmt.Errorf("reftest: %s: %w", e.Name(), err)
			}
		}
		out[e.Name()] = sha(b)
	}
	return out, nil
}

// canonicalJSON re-encodes a JSON document with its object keys sorted
// and its numbers as written.
func canonicalJSON(b []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// toolImport matches what makes a tool depend on another file of tools/:
// an import statement, or the file's name quoted (a script it runs).
var toolImport = regexp.MustCompile(`(?m)^\s*(?:from\s+([A-Za-z_]\w*)\s+import|import\s+([A-Za-z_]\w*))|["']([A-Za-z_]\w*)\.py["']`)

// toolSources hashes the script at tool and, transitively, every file of
// its folder that it imports or names in quotes.
func toolSources(tool string) (map[string]string, error) {
	dir := filepath.Dir(tool)
	out := map[string]string{}
	todo := []string{filepath.Base(tool)}
	for len(todo) > 0 {
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if _, done := out[name]; done {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("reftest: the reference tool: %w", err)
		}
		out[name] = sha(b)
		for _, m := range toolImport.FindAllSubmatch(b, -1) {
			dep := string(m[1]) + string(m[2]) + string(m[3]) + ".py"
			if _, err := os.Stat(filepath.Join(dir, dep)); err == nil {
				todo = append(todo, dep)
			}
		}
	}
	return out, nil
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func validName(n string) bool {
	return n != "" && n != "." && n != ".." && path.Base(n) == n && !strings.ContainsAny(n, `/\`) && n != "manifest.json"
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
