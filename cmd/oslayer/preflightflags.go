package main

import (
	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/pipeline/settings"
	"github.com/oslayer/oslayer/preflight"
)

// preflightFlags are the preflight options shared by preflight and build,
// registered from pipeline.Flags. (--base and --arch belong to each
// command: build has its own base.)
type preflightFlags struct {
	// set holds preflight (pipeline.Flags), shared with the command's
	// other settings flags.
	set *settings.Settings
}

func (f *preflightFlags) register(fs *pflag.FlagSet) {
	if f.set == nil {
		f.set = &settings.Settings{}
	}
	registerSettings(fs, pipeline.FlagsPreflight, f.set)
}

// requireBase is --require-base.
func (f *preflightFlags) requireBase() string {
	if f.set.Preflight == nil {
		return ""
	}
	return f.set.Preflight.RequireBase
}

// options validates the flags into preflight options.
func (f *preflightFlags) options(g *globals) (preflight.Options, error) {
	pf, err := f.spec()
	if err != nil {
		return preflight.Options{}, err
	}
	return preflight.Options{
		Skip:            pf.Skip,
		ExpectVersion:   pf.ExpectVersion,
		FatalWarnings:   pf.FatalWarnings,
		DenyUsrOverride: pf.DenyUsrOverride,
		AllowSecrets:    pf.AllowSecrets,
		MaxAddedBytes:   pf.MaxAddedBytes,
		WarnLayers:      pf.WarnLayers,
		MaxLayers:       pf.MaxLayers,
		Log:             g.log,
	}, nil
}

// spec maps the flags onto the build specification's preflight options
// (pipeline's one mapping) and validates them; errors name the flag.
func (f *preflightFlags) spec() (pipeline.Preflight, error) {
	var s pipeline.Spec
	err := s.SetSettings(settings.Settings{Preflight: f.set.Preflight})
	if err == nil {
		err = pipeline.CheckPreflight(s.Preflight)
	}
	return s.Preflight, flagError(err)
}
