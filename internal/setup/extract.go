package setup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/internal/archive"
	"github.com/anna-search/anna/internal/atomicfile"
)

// installMember puts member of the archive pkg at dest: extracted into a
// temporary folder beside pkg (stopping on ctx's cancellation), then copied
// to a temporary file beside dest, synced and renamed over it
// (atomicfile.Copy). A failure part way leaves dest as it was.
func installMember(ctx context.Context, pkg, member, dest string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(pkg), ".extract-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := archive.ExtractContext(ctx, pkg, map[string]string{member: "member"}, tmp); err != nil {
		return fmt.Errorf("%s: %w", pkg, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return atomicfile.Copy(dest, filepath.Join(tmp, "member"))
}
