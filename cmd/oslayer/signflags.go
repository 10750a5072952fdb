package main

import (
	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/builder"
	"github.com/oslayer/oslayer/registry"
)

// signFlags are build's signing options.
type signFlags struct{}

func (f *signFlags) register(fs *pflag.FlagSet) {}

// stages returns the sign and attest stages, or none without --sign-key.
func (f *signFlags) stages(g *globals, reg *registry.Options) ([]builder.Stage, error) {
	return nil, nil
}
