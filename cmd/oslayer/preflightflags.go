package main

import (
	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/builder"
	"github.com/oslayer/oslayer/registry"
)

// preflightFlags are the preflight options shared by preflight and build.
type preflightFlags struct{}

func (f *preflightFlags) register(fs *pflag.FlagSet) {}

// stage returns the preflight stage that build runs before the tag moves.
func (f *preflightFlags) stage(g *globals, reg *registry.Options) (builder.Stage, error) {
	return nil, nil
}
