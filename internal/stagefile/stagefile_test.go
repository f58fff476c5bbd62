package stagefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type set struct {
	Steps int
	Data  string
}

type rep struct{ Examples int }

func TestResumeAndRefuse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work")
	r, err := Open[set, rep]("job", "run", dir, "job.json", set{Steps: 4, Data: "d"})
	if err != nil {
		t.Fatal(err)
	}
	r.Report.Examples = 7
	if err := r.Finish("mine"); err != nil {
		t.Fatal(err)
	}
	again, err := Open[set, rep]("job", "run", dir, "job.json", set{Steps: 4, Data: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Done["mine"] || again.Done["train"] || again.Report.Examples != 7 {
		t.Fatalf("reopened record %+v", again)
	}
	_, err = Open[set, rep]("job", "run", dir, "job.json", set{Steps: 5, Data: "d"})
	if err == nil || !strings.Contains(err.Error(), "begun with Steps 4; this run asks for 5") {
		t.Fatalf("other settings: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "job.json"), []byte("{torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open[set, rep]("job", "run", dir, "job.json", set{Steps: 4}); err == nil || !strings.Contains(err.Error(), "job.json") {
		t.Fatalf("damaged record: %v", err)
	}
}

func TestZeroReportOmitted(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open[set, struct{}]("job", "run", dir, "job.json", set{}); err != nil {
		t.Fatal(err)
	}
	bs, err := os.ReadFile(filepath.Join(dir, "job.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(bs), "report") {
		t.Fatalf("an empty report is written:\n%s", bs)
	}
}
