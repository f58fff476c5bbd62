//go:build !cgo || annapure

package main

import (
	"context"
	"io"

	"github.com/anna-search/anna/internal/setup"
)

// nativeBuild is false: this build tokenizes and runs models in Go, so what
// it needs is the model alone.
const nativeBuild = false

// install runs the installer (internal/setup) in this process.
func install(ctx context.Context, native bool, stderr io.Writer) error {
	return setup.Run(ctx, setup.Options{Native: native, Paths: setup.HomePaths(), Log: stderr})
}
