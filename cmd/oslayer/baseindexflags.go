package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/internal/registry"
)

// baseIndexFlags choose whether and where the base is indexed.
type baseIndexFlags struct {
	mode     string
	cacheDir string
}

func (f *baseIndexFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.mode, "base-index", assemble.BaseIndexAuto, "auto: read the base once per digest (cached on disk and next to the image) so units the OS ships are enabled as their [Install] says; off: never read the base and assume what the report says")
	fs.StringVar(&f.cacheDir, "base-index-cache", "", "directory of cached base indexes (default $"+baseindex.CacheEnv+", else $XDG_CACHE_HOME/oslayer/baseindex)")
}

// options returns the index options with repository (may be "") as the
// place of the shared artifact.
func (f *baseIndexFlags) options(reg *registry.Options, repository string, log *slog.Logger) (assemble.IndexOptions, error) {
	if f.mode != assemble.BaseIndexAuto && f.mode != assemble.BaseIndexOff {
		return assemble.IndexOptions{}, fmt.Errorf("--base-index %q: want %s or %s", f.mode, assemble.BaseIndexAuto, assemble.BaseIndexOff)
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
	if err != nil || ref == "" || f.mode == assemble.BaseIndexOff {
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
