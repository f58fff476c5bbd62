package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/anna-search/anna/encoder"
	"github.com/anna-search/anna/engine"
	"github.com/anna-search/anna/internal/home"
	"github.com/anna-search/anna/internal/model/installed"
	"github.com/anna-search/anna/model/catalog"
)

// requireFlags fails with a usage error naming the first of names not given.
func requireFlags(cmd *cobra.Command, names ...string) error {
	for _, n := range names {
		f := cmd.Flags().Lookup(n)
		if f == nil || !f.Changed || f.Value.String() == "" {
			placeholder, _ := pflag.UnquoteUsage(f)
			if placeholder == "" {
				placeholder = "VALUE"
			}
			return usageErrorf("%s %s is required", dashed(n), placeholder)
		}
	}
	return nil
}

// dashed writes a flag as typed: -k for one letter, --name otherwise.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// atLeast checks an integer flag's lower bound.
func atLeast(name string, v, min int) error {
	if v < min {
		return usageErrorf("%s must be at least %d (got %d)", dashed(name), min, v)
	}
	return nil
}

// inRange checks a float flag's bounds.
func inRange(name string, v, lo, hi float64) error {
	if math.IsNaN(v) || v < lo || v > hi {
		return usageErrorf("%s must be between %g and %g (got %g)", dashed(name), lo, hi, v)
	}
	return nil
}

// oneOf checks a string flag against its allowed values.
func oneOf(name, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return usageErrorf("%s %q: want %s", dashed(name), v, strings.Join(allowed, ", "))
}

// parseMode reads --mode (lexical, dense, hybrid, rerank).
func parseMode(flag, s string) (engine.Mode, error) {
	m, err := engine.ParseMode(s)
	if err != nil {
		return "", usageErrorf("%s %q: want lexical, dense, hybrid or rerank", dashed(flag), s)
	}
	return m, nil
}

// maybeFloat is a float flag that is off until given ("off" turns it off
// again); off reads as NaN.
type maybeFloat struct{ v *float64 }

func (f maybeFloat) String() string {
	if f.v == nil || math.IsNaN(*f.v) {
		return "off"
	}
	return strconv.FormatFloat(*f.v, 'g', -1, 64)
}

func (f maybeFloat) Set(s string) error {
	if s == "off" {
		*f.v = math.NaN()
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("want a finite number or off")
	}
	*f.v = v
	return nil
}

func (f maybeFloat) Type() string { return "float" }

// indexFlag adds --index.
func indexFlag(cmd *cobra.Command, dir *string, what string) {
	cmd.Flags().StringVar(dir, "index", "", what)
}

// chunkFlags are the flags that say how long documents are split.
type chunkFlags struct {
	tokens, stride int
	off            bool
	maxPassages    int // engine.Options.MaxPassages, checked by chunking
}

func (c *chunkFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&c.tokens, "chunk-tokens", 0, "split documents longer than the model into windows of `N` tokens (0: the model's max length)")
	f.IntVar(&c.stride, "chunk-stride", 0, "each window starts `N` tokens after the previous one (0: half a window)")
	f.BoolVar(&c.off, "no-chunking", false, "embed each document once, truncated to the model's max length")
	f.IntVar(&c.maxPassages, "max-passages", engine.DefaultMaxPassages, "embed a document split into more than `N` passages by its first N (named on stderr; BM25 still indexes all its text)")
}

// chunking is what the flags ask for, nil when none was given.
func (c *chunkFlags) chunking(cmd *cobra.Command) (*engine.Chunking, error) {
	f := cmd.Flags()
	if err := atLeast("max-passages", c.maxPassages, 1); err != nil {
		return nil, err
	}
	if !f.Changed("chunk-tokens") && !f.Changed("chunk-stride") && !f.Changed("no-chunking") {
		return nil, nil
	}
	if c.off && (f.Changed("chunk-tokens") || f.Changed("chunk-stride")) {
		return nil, usageErrorf("--no-chunking cannot be combined with --chunk-tokens or --chunk-stride")
	}
	if err := atLeast("chunk-tokens", c.tokens, 0); err != nil {
		return nil, err
	}
	if err := atLeast("chunk-stride", c.stride, 0); err != nil {
		return nil, err
	}
	return &engine.Chunking{Off: c.off, Tokens: c.tokens, Stride: c.stride}, nil
}

// modelDirValue is the value of a --model or --reranker flag: a model
// directory, or the name of one under $ANNA_HOME/models (what `annactl
// models install NAME` and `models list` show). A path, or a directory
// that exists where it is named, wins over an installed name.
type modelDirValue struct{ p *string }

func (m modelDirValue) String() string {
	if m.p == nil {
		return ""
	}
	return *m.p
}

func (m modelDirValue) Set(s string) error {
	*m.p = resolveModelDir(s)
	return nil
}

func (m modelDirValue) Type() string { return "string" }

// modelVar defines a model-directory flag (see modelDirValue).
func modelVar(f *pflag.FlagSet, p *string, name, def, usage string) {
	*p = def
	f.Var(modelDirValue{p}, name, usage+"; or the NAME of an installed model")
}

// resolveModelDir is installed.Resolve, as the engine resolves
// Options.Model (the catalogue's aliases too); a name it cannot resolve
// is left as given, for the command to say what is wrong with it.
func resolveModelDir(s string) string {
	if d, err := installed.Resolve(home.ModelsDir(), s); err == nil {
		return d
	}
	return s
}

// modelDir is a model flag's value for a command about to load it: the
// directory itself, or, for a name that resolved to nothing (modelDirValue
// leaves it as given), installed.Resolve's error (where it looked, what is
// installed, how to install it) rather than the loader's missing-manifest
// one. A remote spec (URL#NAME) passes as it is.
func modelDir(s string) (string, error) {
	if encoder.IsRemote(s) {
		return s, nil
	}
	return installed.Resolve(home.ModelsDir(), s)
}

// int8DefaultNames lists the catalogue's models indexed in their int8 form
// unless float32 is asked for (catalog.Entry.Int8Default), for --precision's
// help.
func int8DefaultNames() string {
	var names []string
	for _, e := range catalog.Entries() {
		if e.Int8Default {
			names = append(names, e.Name)
		}
	}
	return strings.Join(names, ", ")
}

// fusionFlags are the flags that say how the retrieval lists are fused.
type fusionFlags struct {
	weights []string
	k       int
	fusion  string
}

func (u *fusionFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&u.weights, "weight", nil, "weight of a fused list, `LIST=W` with LIST lexical, dense or rerank (repeatable; default 1 each)")
	f.IntVar(&u.k, "rrf-k", 0, "RRF's rank constant `K` (0: 60)")
	f.StringVar(&u.fusion, "fusion", "", "how the lists are fused: rrf (ranks), minmax (scores scaled to [0,1], summed) or dbsf (mean±3σ scaled to [0,1], summed) (default: the index's choice, recorded by eval --choose-fusion, else dbsf)")
}

// apply puts the fusion flags into opts.
func (u *fusionFlags) apply(opts *engine.SearchOptions) error {
	if err := atLeast("rrf-k", u.k, 0); err != nil {
		return err
	}
	if u.fusion != "" {
		if err := oneOf("fusion", u.fusion, "rrf", "minmax", "dbsf"); err != nil {
			return err
		}
	}
	if u.k != 0 {
		if u.fusion != "" && u.fusion != "rrf" {
			return usageErrorf("--rrf-k is RRF's constant: not with --fusion %s", u.fusion)
		}
		u.fusion = "rrf" // whatever the index chose
	}
	opts.Fusion, opts.RRFK = engine.Fusion(u.fusion), u.k
	for _, s := range u.weights {
		name, v, ok := strings.Cut(s, "=")
		if !ok {
			return usageErrorf("--weight %q: want LIST=W, e.g. dense=2", s)
		}
		if err := oneOf("weight", name, "lexical", "dense", "rerank"); err != nil {
			return err
		}
		w, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(w) || math.IsInf(w, 0) || w <= 0 {
			return usageErrorf("--weight %s: %q is not a finite number > 0", name, v)
		}
		if opts.Weights == nil {
			opts.Weights = map[string]float64{}
		}
		opts.Weights[name] = w
	}
	return nil
}
