package ingest_test

import (
	"context"
	"fmt"
	"log"
	"os/signal"
	"syscall"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/ingest"
)

// Keep an index in step with a folder of PDFs, web pages, Office files,
// notebooks, mail, notes and code until the program is interrupted.
func ExampleWatch() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	eng, err := engine.Open(ctx, "papers-index", engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	err = ingest.Watch(ctx, eng, "/home/me/papers", ingest.WatchOptions{
		OnSync: func(st ingest.FolderStats, err error) {
			fmt.Printf("%d files read, %d gone, %v\n", st.FilesRead, st.FilesRemoved, err)
		},
	})
	if err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}

// Index a folder once and say where the best hit lies.
func ExampleDir() {
	ctx := context.Background()
	eng, err := engine.Open(ctx, "papers-index", engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	st, err := ingest.Dir(ctx, eng, "/home/me/papers", ingest.FolderOptions{Remove: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.FilesRead, "files read,", len(st.Skipped), "not read")
	rs, err := eng.Search(ctx, "which lens was installed at Fastnet", engine.SearchOptions{K: 3})
	if err == nil && len(rs) > 0 && rs[0].Location != nil {
		fmt.Println(rs[0].Location) // e.g. reports/northern-lights-report.pdf:page 2
	}
}
