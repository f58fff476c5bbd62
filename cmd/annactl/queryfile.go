package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// maxQueryFile bounds a query read by search --query-file.
const maxQueryFile = 64 << 20

// searchQuery is search's query: the arguments joined by spaces, or the
// whole of file ("-": stdin) with surrounding space trimmed, for a query
// too long for a command line (the kernel refuses an argument list past a
// few MB with "Argument list too long").
func (a *app) searchQuery(args []string, file string) (string, error) {
	if file == "" {
		return strings.Join(args, " "), nil
	}
	var r io.Reader = a.stdin
	name := "stdin"
	if file == "-" {
		if isTerminal(a.stdin) {
			return "", usageErrorf("--query-file -: stdin is a terminal; pipe the query in")
		}
	} else {
		f, err := os.Open(file)
		if err != nil {
			return "", fmt.Errorf("--query-file: %w", err)
		}
		defer f.Close()
		r, name = f, file
	}
	b, err := io.ReadAll(io.LimitReader(r, maxQueryFile+1))
	if err != nil {
		return "", fmt.Errorf("--query-file: reading %s: %w", name, err)
	}
	if len(b) > maxQueryFile {
		return "", fmt.Errorf("--query-file: %s is longer than %d bytes", name, maxQueryFile)
	}
	q := strings.TrimSpace(string(b))
	if q == "" {
		return "", usageErrorf("no query given: %s is empty", name)
	}
	return q, nil
}
