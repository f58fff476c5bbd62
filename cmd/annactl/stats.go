package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/anna-search/anna/engine"
)

func init() {
	register(command{name: "stats", summary: "show counts and model of an anna directory", run: runStats})
}

func runStats(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("stats", flag.ContinueOnError)
	dir := fs.String("index", "", "anna directory")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *dir == "" {
		fs.Usage()
		return errUsage
	}
	eng, err := openExisting(ctx, *dir, engine.Options{Logf: logf})
	if err != nil {
		return err
	}
	defer eng.Close()
	st, err := eng.Stats()
	if err != nil {
		return err
	}
	md := st.Model.Dir
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(struct {
			engine.Stats
			ModelDir string `json:"model_dir"`
		}{st, md})
	}
	if md == "" {
		md = "(default)"
	}
	fmt.Printf("directory      %s\ndocuments      %d\nchange seq     %d\nmodel          %s\nmodel dir      %s\ndimensions     %d\nBM25 docs      %d\ndense vectors  %d\n",
		st.Dir, st.Documents, st.Seq, st.Model.Fingerprint, md, st.Model.Dim, st.LexicalDocs, st.DenseVectors)
	return nil
}
