// Command annactl is anna's command-line tool: embed, index, search, eval,
// mine negatives, train and re-index, over one anna directory on disk.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand. run gets the arguments after the subcommand name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

// commands is filled by each subcommand file's init. It lives in package main
// only: the library packages keep no global state.
var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

// errUsage marks an error already explained by a flag set's usage output.
var errUsage = errors.New("usage")

func main() {
	os.Exit(run())
}

func run() int {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			return 2
		}
		return 0
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "annactl: unknown command %q\n\n", os.Args[1])
		usage()
		return 2
	}
	// The first Ctrl-C cancels the context so long jobs stop cleanly at a
	// batch boundary (and can be resumed); a second one kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := c.run(ctx, os.Args[2:]); err != nil {
		if errors.Is(err, errUsage) {
			return 2
		}
		if errors.Is(err, context.Canceled) {
			fmt.Fprintf(os.Stderr, "annactl %s: interrupted\n", c.name)
			return 130
		}
		fmt.Fprintf(os.Stderr, "annactl %s: %v\n", c.name, err)
		return 1
	}
	return 0
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: annactl <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-16s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'annactl <command> -h' for a command's flags.")
}
