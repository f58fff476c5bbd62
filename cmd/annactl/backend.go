package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/index/weaviate"
)

// apiKeyEnv holds the Weaviate API key: never a flag, whose value would end
// up in shell history and in ps.
const apiKeyEnv = "ANNA_WEAVIATE_API_KEY"

// backendFlags choose where a command's lists come from: the directory's
// own indexes, or a Weaviate cluster (engine.Weaviate).
type backendFlags struct {
	backend, urls, alias string
	replication          int
	aliasGiven           bool // --weaviate-alias on the command line
}

func (b *backendFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&b.backend, "backend", "local", "where the BM25 and dense lists come from: local (the directory's indexes) or weaviate (a Weaviate cluster; API key from $"+apiKeyEnv+")")
	f.StringVar(&b.urls, "weaviate-url", "", "Weaviate node `URL`s, comma-separated (with --backend weaviate)")
	f.StringVar(&b.alias, "weaviate-alias", "Anna", "Weaviate alias `NAME` of the directory's collection (one alias per directory)")
	f.IntVar(&b.replication, "weaviate-replication", 0, "replication factor of the collections created (0: the cluster's default)")
}

// scratch gives opts a fresh alias of its own, for a command indexing into
// a temporary directory (unless --weaviate-alias was given), and returns
// what drops its collections afterwards.
func (b *backendFlags) scratch(opts *engine.Options) func() error {
	if opts.Weaviate == nil || b.aliasGiven {
		return func() error { return nil }
	}
	opts.Weaviate.Alias = fmt.Sprintf("AnnaScratch%x", rand.Uint64())
	w := *opts.Weaviate
	return func() error {
		c, err := weaviate.New(weaviate.Config{URLs: append([]string(nil), w.URLs...), APIKey: w.APIKey, Alias: w.Alias})
		if err == nil {
			err = c.DropAll(context.Background())
		}
		if err != nil {
			return fmt.Errorf("dropping the scratch collections of alias %s: %w", w.Alias, err)
		}
		return nil
	}
}

// apply sets opts.Weaviate from the flags and the environment.
func (b *backendFlags) apply(cmd *cobra.Command, opts *engine.Options) error {
	b.aliasGiven = cmd.Flags().Changed("weaviate-alias")
	switch b.backend {
	case "local":
		if b.urls != "" {
			return usageErrorf("--weaviate-url needs --backend weaviate")
		}
		return nil
	case "weaviate":
	default:
		return usageErrorf("--backend %q: want local or weaviate", b.backend)
	}
	if b.urls == "" {
		return usageErrorf("--backend weaviate needs --weaviate-url URL")
	}
	if err := atLeast("weaviate-replication", b.replication, 0); err != nil {
		return err
	}
	var urls []string
	for _, u := range strings.Split(b.urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	opts.Weaviate = &engine.Weaviate{URLs: urls, APIKey: os.Getenv(apiKeyEnv), Alias: b.alias, Replication: b.replication}
	return nil
}
