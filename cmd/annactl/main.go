// Command annactl is anna's command-line tool: index, search, check and
// evaluate an anna directory, embed texts, mine hard negatives, train and
// re-index with the trained model.
//
// Conventions, the same for every command: flags may come before or after
// arguments, in GNU --long form (a few have a one-letter form); -h/--help
// prints help to stdout and exits 0; a usage error names what is wrong and
// exits 2; an interrupted run exits 130 and says how to resume; any other
// failure exits 1. One vocabulary: --index DIR (an anna directory), --input
// and --output (data files), --model DIR, --mode lexical|dense|hybrid|rerank,
// --batch (documents per batch), --cache (the embedding cache), --json.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := interruptContext()
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// interruptContext is cancelled by the first Ctrl-C (or SIGTERM), so long
// jobs stop cleanly at a batch boundary and can be resumed; a second one
// kills the process as usual.
func interruptContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-ch:
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

// app is what every command shares: the standard streams.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// logf reports what the engine does on its own (rebuilds, replays) on stderr.
func (a *app) logf(format string, args ...any) { fmt.Fprintf(a.stderr, format+"\n", args...) }

// run executes annactl with args and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	return a.exit(cmd, err)
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "annactl",
		Short: "anna: local hybrid search, and the tools that turn it into a teacher for better encoders",
		Long: `annactl indexes documents into an anna directory (BM25 + HNSW over embeddings
computed in-process), searches, checks and evaluates it, and mines hard
negatives, trains and re-indexes with the trained model.

Every command takes -h/--help.`,
		Version:       version() + " (" + runtimeLine() + ")",
		SilenceErrors: true,
		SilenceUsage:  true,
		// unknownCommand suggests the commands this many edits away.
		SuggestionsMinimumDistance: 2,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(a.stderr)
			cmd.Usage()
			return usageErrorf("no command given")
		},
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// "annactl serach --index x": the flags are the misspelt
		// command's, so the command is what is wrong.
		if !c.HasParent() && len(c.Flags().Args()) > 0 {
			return unknownCommand(c, c.Flags().Arg(0))
		}
		return usageError{err}
	})
	root.AddCommand(
		a.indexCommand(), a.deleteCommand(), a.searchCommand(), a.statsCommand(), a.checkCommand(), a.reindexCommand(),
		a.evalCommand(), a.embedCommand(), a.modelsCommand(),
		a.mineCommand(), a.doc2queryCommand(), a.convertCommand(), a.trainCommand(),
		a.rerankersCommand(), a.serveCommand(), a.mcpCommand(),
		a.adaptCommand(),
	)
	return root
}

// version is the module version, or the VCS revision for a build from a
// checkout.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if (v == "" || v == "(devel)") && rev != "" {
		return "devel " + rev[:min(12, len(rev))] + dirty
	}
	if v == "" {
		return "devel"
	}
	return v
}

// unknownCommand is the usage error for a command root does not have,
// with the nearest ones (by edit distance or prefix) suggested.
func unknownCommand(root *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q", name)
	if s := root.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q", s[0])
		for _, o := range s[1:] {
			msg += fmt.Sprintf(" or %q", o)
		}
		msg += "?"
	}
	return usageError{errors.New(msg)}
}

// usageError is a mistake in the command line: exit 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitError ends a command with a code of its own (check: 1 when it finds
// problems) after the command has said what it needs to.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// exit prints err (once, without repeating the command's name) and returns
// the exit code.
func (a *app) exit(cmd *cobra.Command, err error) int {
	if err == nil {
		return 0
	}
	var ex exitError
	if errors.As(err, &ex) {
		return ex.code
	}
	name := "annactl"
	if cmd != nil && cmd.HasParent() {
		name = cmd.CommandPath()
	}
	msg := err.Error()
	// Library errors name their package ("eval: ..."); when that is the
	// command's own name, say it once.
	if cmd != nil {
		msg = strings.TrimPrefix(msg, cmd.Name()+": ")
	}
	var u usageError
	switch {
	case errors.As(err, &u):
		fmt.Fprintf(a.stderr, "%s: %s\n", name, msg)
		printHints(a.stderr, err)
		fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", name)
		return 2
	case errors.Is(err, context.Canceled):
		if msg == context.Canceled.Error() {
			fmt.Fprintf(a.stderr, "%s: interrupted\n", name)
		} else {
			fmt.Fprintf(a.stderr, "%s: interrupted: %s\n", name, msg)
		}
		return 130
	}
	fmt.Fprintf(a.stderr, "%s: %s\n", name, msg)
	printHints(a.stderr, err)
	return 1
}
