package main

// What `annactl index FOLDER` (and --watch FOLDER, and serve --watch)
// does: a folder's files read through package files and synced into the
// engine by package ingest, the files not read named by reason.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/format/files"
	"github.com/anna-search/anna/ingest"
)

// folderFlags are the flags that choose a folder's files.
type folderFlags struct {
	include, exclude []string
	noIgnore         bool
	strict           bool
}

func (f *folderFlags) register(cmd *cobra.Command, strict bool) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.include, "include", nil, "a folder: read only the files matching `GLOB` (relative path, or name without a slash; ** for any folders; repeatable)")
	fl.StringArrayVar(&f.exclude, "exclude", nil, "a folder: leave out the files and folders matching `GLOB` (repeatable)")
	fl.BoolVar(&f.noIgnore, "no-ignore", false, "a folder: read files that .gitignore and .annaignore leave out")
	if strict {
		fl.BoolVar(&f.strict, "strict", false, "a folder: exit 1 when a file fails to read (it is named either way, and the others are indexed)")
	}
}

func (f *folderFlags) options() (files.Options, error) {
	o := files.Options{Include: f.include, Exclude: f.exclude, NoIgnoreFiles: f.noIgnore}
	if err := o.Check(); err != nil {
		return o, usageErrorf("%v", err)
	}
	return o, nil
}

// folderReport gathers what a folder's sync says beyond its counts: the
// files that failed (named as they come) and the notes.
type folderReport struct {
	a      *app
	failed int
	notes  []string
	noted  int
	// quiet leaves unnamed the files that failed before and were not
	// read again (a watch's syncs after its first).
	quiet bool
}

func (r *folderReport) onSkip(f files.File) {
	if f.Err != nil && !f.Dir {
		r.failed++
		if r.quiet && errors.Is(f.Err, ingest.ErrNotReadAgain) {
			return
		}
		fmt.Fprintf(r.a.stderr, "warning: %v\n", f.Err)
	}
}

func (r *folderReport) onNote(rel, note string) {
	r.noted++
	if len(r.notes) < namedMax {
		r.notes = append(r.notes, rel+": "+note)
	}
}

// summary prints a sync's lines: the files, then the documents.
func (r *folderReport) summary(name string, fs ingest.FolderStats) {
	var skipped []files.File
	for _, f := range fs.Skipped {
		skipped = append(skipped, f)
	}
	fmt.Fprintf(r.a.stderr, "indexed %s: %s\n", name, files.Summary(fs.FilesRead+fs.FilesUnchanged, skipped))
	fmt.Fprintf(r.a.stderr, "  %s read, %s unchanged (not read again)", plural(fs.FilesRead, "file"), plural(fs.FilesUnchanged, "file"))
	if fs.FilesStillFailing > 0 {
		fmt.Fprintf(r.a.stderr, ", %s failed before and unchanged (not read again)", plural(fs.FilesStillFailing, "file"))
	}
	if fs.FilesMoved > 0 {
		fmt.Fprintf(r.a.stderr, ", %s moved", plural(fs.FilesMoved, "file"))
	}
	if fs.FilesRemoved > 0 {
		fmt.Fprintf(r.a.stderr, ", %s gone", plural(fs.FilesRemoved, "file"))
	}
	fmt.Fprintf(r.a.stderr, "; documents (parts of files): %d added, %d updated, %d unchanged, %d removed", fs.Added, fs.Updated, fs.Unchanged, fs.Deleted)
	if fs.Reused > 0 {
		fmt.Fprintf(r.a.stderr, " (%d kept their vectors)", fs.Reused)
	}
	fmt.Fprintln(r.a.stderr)
	if r.noted > 0 {
		fmt.Fprintf(r.a.stderr, "notes: %s%s\n", strings.Join(r.notes, "; "), more(r.noted, len(r.notes)))
		r.notes, r.noted = nil, 0
	}
}

// indexFolder syncs folder into eng (ingest.Dir) with a progress line;
// with remove (--sync) the documents of files gone leave.
func (a *app) indexFolder(ctx context.Context, eng *engine.Engine, folder string, ff folderFlags, batch int, remove bool, passages *passageProgress) (ingest.FolderStats, *folderReport, error) {
	fo, err := ff.options()
	if err != nil {
		return ingest.FolderStats{}, nil, err
	}
	p := a.progress("indexing "+folder, 0)
	passages.show(p)
	defer p.done()
	rep := &folderReport{a: a}
	opt := ingest.FolderOptions{
		Options: ingest.Options{
			Batch: batch,
			Progress: func(pr ingest.Progress) {
				if pr.Read == 0 {
					p.setTotal(pr.Total)
					p.update(0, fmt.Sprintf("reading and embedding %s…", plural(pr.Total, "new or changed file")))
					return
				}
				p.update(pr.Read, fmt.Sprintf("files (%d documents new, %d updated)", pr.Added, pr.Updated))
			},
		},
		Files:  fo,
		Remove: remove,
		OnSkip: rep.onSkip,
		OnNote: rep.onNote,
	}
	fs, err := ingest.Dir(ctx, eng, folder, opt)
	return fs, rep, err
}

// watchFolder keeps eng in step with folder until ctx is done, a line per
// sync.
func (a *app) watchFolder(ctx context.Context, eng *engine.Engine, folder string, ff folderFlags, batch int, ready func()) error {
	fo, err := ff.options()
	if err != nil {
		return err
	}
	rep := &folderReport{a: a}
	first := true
	opt := ingest.WatchOptions{
		FolderOptions: ingest.FolderOptions{Options: ingest.Options{Batch: batch}, Files: fo, OnSkip: rep.onSkip, OnNote: rep.onNote},
		OnSync: func(fs ingest.FolderStats, err error) {
			if err != nil {
				fmt.Fprintf(a.stderr, "%s watch: %v\n", time.Now().Format("15:04:05"), err)
				if fs.Files == 0 {
					return
				}
			}
			if first {
				rep.summary(folder, fs)
				first, rep.quiet = false, true
				return
			}
			if fs.FilesRead+fs.FilesRemoved+fs.FilesMoved+fs.FilesFailed == 0 && fs.Deleted == 0 {
				return
			}
			fmt.Fprintf(a.stderr, "%s synced %s: %s read, %s moved, %s gone; documents: %d added, %d updated, %d removed (%d kept their vectors)\n",
				time.Now().Format("15:04:05"), folder, plural(fs.FilesRead, "file"), plural(fs.FilesMoved, "file"), plural(fs.FilesRemoved, "file"),
				fs.Added, fs.Updated, fs.Deleted, fs.Reused)
		},
		Ready: func() {
			fmt.Fprintf(a.stderr, "watching %s (Ctrl-C to stop)\n", folder)
			if ready != nil {
				ready()
			}
		},
	}
	err = ingest.Watch(ctx, eng, folder, opt)
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(a.stderr, "stopped watching %s: every sync above is committed\n", folder)
		return nil
	}
	return err
}
