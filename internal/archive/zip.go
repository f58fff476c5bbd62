package archive

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
)

// ErrTooLarge is what a Zip's reads wrap when the archive would inflate
// past its budget (a zip bomb) or holds too many members.
var ErrTooLarge = errors.New("inflates past the limit")

// maxMembers is the most members a Zip opens an archive with.
const maxMembers = 100000

// Zip reads members of an untrusted zip held in memory (Office documents,
// EPUB), each read whole, all of them together inflating at most the
// budget it was opened with: a zip bomb costs the budget and no more.
type Zip struct {
	r      *zip.Reader
	files  map[string]*zip.File
	budget int64 // bytes left to inflate
}

// OpenZip opens data as a zip whose members may inflate to budget bytes in
// all.
func OpenZip(data []byte, budget int64) (*Zip, error) {
	r, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	if len(r.File) > maxMembers {
		return nil, fmt.Errorf("%w: %d members, more than %d", ErrTooLarge, len(r.File), maxMembers)
	}
	z := &Zip{r: r, files: make(map[string]*zip.File, len(r.File)), budget: budget}
	for _, f := range r.File {
		z.files[path.Clean(f.Name)] = f
	}
	return z, nil
}

// Has reports whether the archive holds member name.
func (z *Zip) Has(name string) bool { _, ok := z.files[path.Clean(name)]; return ok }

// Names lists the members, in the archive's order.
func (z *Zip) Names() []string {
	out := make([]string, len(z.r.File))
	for i, f := range z.r.File {
		out[i] = f.Name
	}
	return out
}

// Read inflates member name whole. It fails, wrapping ErrTooLarge, when
// the member would take the archive past its budget, whatever its header
// claims; fs.ErrNotExist when there is no such member.
func (z *Zip) Read(name string) ([]byte, error) {
	f, ok := z.files[path.Clean(name)]
	if !ok {
		return nil, fmt.Errorf("%s: %w", name, errNotExist)
	}
	if int64(f.UncompressedSize64) > z.budget || f.UncompressedSize64 > 1<<62 {
		return nil, fmt.Errorf("%s: %w: %d bytes, %d left to inflate", name, ErrTooLarge, f.UncompressedSize64, z.budget)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, z.budget+1))
	if int64(len(b)) > z.budget {
		return nil, fmt.Errorf("%s: %w: it inflates past the %d bytes left", name, ErrTooLarge, z.budget)
	}
	z.budget -= int64(len(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b, nil
}

var errNotExist = errors.New("no such member")

// IsNotExist reports whether err is Read's for a missing member.
func IsNotExist(err error) bool { return errors.Is(err, errNotExist) }
