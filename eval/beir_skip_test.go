package eval

import (
	"strings"
	"testing"

	"github.com/anna-search/anna/storage"
)

func TestReadCorpusSkipping(t *testing.T) {
	in := "{\"_id\":\"a\",\"text\":\"x\"}\nnot json\n{\"text\":\"no id\"}\n{\"_id\":\"b\",\"text\":\"y\"}"
	var got []string
	var bad []int
	err := ReadCorpusSkipping(strings.NewReader(in), "c.jsonl", func(line int, err error) error {
		if !strings.Contains(err.Error(), "c.jsonl:") {
			t.Errorf("error does not name the file: %v", err)
		}
		bad = append(bad, line)
		return nil
	}, func(line int, d storage.Doc) error {
		got = append(got, d.ID)
		return nil
	})
	if err != nil || strings.Join(got, ",") != "a,b" || len(bad) != 2 || bad[0] != 2 || bad[1] != 3 {
		t.Fatalf("got %v bad %v err %v", got, bad, err)
	}
	// Without a handler the first bad line stops the read and is named.
	err = ReadCorpus(strings.NewReader(in), "c.jsonl", func(int, storage.Doc) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "c.jsonl:2") {
		t.Fatalf("want error naming c.jsonl:2, got %v", err)
	}
}
