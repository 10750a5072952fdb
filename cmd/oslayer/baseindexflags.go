package main

import (
	"context"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/pipeline/settings"
)

// baseIndexFlags choose whether and where the base is indexed.
type baseIndexFlags struct {
	// set holds baseIndex (pipeline.Flags), shared with the command's
	// other settings flags.
	set      *settings.Settings
	cacheDir string
}

func (f *baseIndexFlags) register(fs *pflag.FlagSet) {
	if f.set == nil {
		f.set = &settings.Settings{}
	}
	registerSettings(fs, pipeline.FlagsIndex, f.set)
	fs.StringVar(&f.cacheDir, "base-index-cache", "", "directory of cached base indexes (default $"+baseindex.CacheEnv+", else $XDG_CACHE_HOME/oslayer/baseindex)")
}

// options returns the index options with repository (may be "") as the
// place of the shared artifact.
func (f *baseIndexFlags) options(reg *registry.Options, repository string, log *slog.Logger) (assemble.IndexOptions, error) {
	if err := pipeline.CheckSettings(settings.Settings{BaseIndex: f.set.BaseIndex}); err != nil {
		return assemble.IndexOptions{}, flagError(err)
	}
	o := assemble.IndexOptions{CacheDir: f.cacheDir, Repository: repository, Registry: reg, Logger: log}
	if o.CacheDir == "" {
		d, err := baseindex.DefaultCacheDir()
		if err != nil {
			return o, err
		}
		o.CacheDir = d
	}
	return o, nil
}

// cache checks --base-index and returns the cache directory (the
// default one without --base-index-cache).
func (f *baseIndexFlags) cache() (string, error) {
	o, err := f.options(nil, "", nil)
	return o.CacheDir, err
}

// renderBase resolves --base for render and returns its index's tree (nil
// with --base-index=off or without --base).
func (f *baseIndexFlags) renderBase(ctx context.Context, ref, arch string, reg *registry.Options, log *slog.Logger) (*assemble.IndexInfo, *assemble.Base, error) {
	o, err := f.options(reg, "", log)
	if err != nil || ref == "" || f.set.BaseIndex == assemble.BaseIndexOff {
		return nil, nil, err
	}
	base, err := assemble.ResolveBase(ctx, ref, reg, arch)
	if err != nil {
		return nil, nil, err
	}
	info, err := assemble.IndexBase(ctx, base, o)
	if err != nil {
		return nil, nil, err
	}
	return info, base, nil
}
