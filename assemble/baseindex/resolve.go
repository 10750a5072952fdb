package baseindex

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Source says where a resolved index came from.
type Source string

// Sources of an index.
const (
	SourceCache    Source = "cache"    // the disk cache
	SourceRegistry Source = "registry" // the artifact in the repository
	SourceBuilt    Source = "built"    // read from the base's layers now
	// SourceShared: another resolution of the same base in this process
	// was under way; this one waited for its index.
	SourceShared Source = "shared"
)

// Resolver finds or makes the index of a base: the disk cache, then the
// artifact in Repository, then Build (which reads the base's layers once);
// an index found in the registry or built is stored in the disk cache. A
// cached index that fails its checks is rebuilt (with a warning).
type Resolver struct {
	// Cache is the disk cache; nil means none.
	Cache *Cache
	// Repository holds the artifact (read here; written by Publish); nil
	// means none.
	Repository *name.Repository
	// Elsewhere are more repositories the artifact is looked for in, first
	// (the base's own repository: a pipeline that mirrors or promotes a
	// base publishes its index there once, for every builder).
	Elsewhere []name.Repository
	// Remote are the options for reaching Repository.
	Remote []remote.Option
	// Build tunes Build.
	Build Options
	// Logger receives progress and warnings; nil discards them.
	Logger *slog.Logger
}

// Resolved is an index and where it came from.
type Resolved struct {
	Index  *Index
	Source Source
	// Stats are Build's (zero unless Source is SourceBuilt).
	Stats Stats
	// Warnings are problems that did not stop the resolution (a corrupt
	// cache file, an unreadable artifact, a cache that cannot be written).
	Warnings []string
}

// inflight are the resolutions under way in this process, by base digest:
// concurrent builds on one base (a controller building many pools) share
// one read of it.
var inflight = struct {
	sync.Mutex
	m map[v1.Hash]*flight
}{m: map[v1.Hash]*flight{}}

type flight struct {
	done chan struct{}
	ix   *Index
}

// Resolve returns the index of img (whose manifest digest is base). While
// another Resolve of the same base runs in this process, it waits for that
// one's index (SourceShared) instead of reading the base again.
func (r *Resolver) Resolve(ctx context.Context, img v1.Image) (*Resolved, error) {
	base, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("base index: %w", err)
	}
	for {
		inflight.Lock()
		f, busy := inflight.m[base]
		if !busy {
			f = &flight{done: make(chan struct{})}
			inflight.m[base] = f
			inflight.Unlock()
			break
		}
		inflight.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.ix != nil {
			res := &Resolved{Index: f.ix, Source: SourceShared}
			if r.Cache != nil {
				if _, err := os.Stat(r.Cache.File(base)); err != nil {
					r.store(f.ix, func(msg string) { res.Warnings = append(res.Warnings, msg) })
				}
			}
			return res, nil
		}
		// The other resolution failed: try again, maybe as the leader.
	}
	res, err := r.resolve(ctx, img, base)
	inflight.Lock()
	f := inflight.m[base]
	delete(inflight.m, base)
	inflight.Unlock()
	if err == nil {
		f.ix = res.Index
	}
	close(f.done)
	return res, err
}

func (r *Resolver) resolve(ctx context.Context, img v1.Image, base v1.Hash) (*Resolved, error) {
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	res := &Resolved{}
	warn := func(msg string) {
		res.Warnings = append(res.Warnings, msg)
		log.Warn(msg, "base", base.String())
	}
	if r.Cache != nil {
		ix, err := r.Cache.Load(base)
		switch {
		case err != nil:
			warn(fmt.Sprintf("base index cache unusable, rebuilding it: %v", err))
		case ix != nil:
			res.Index, res.Source = ix, SourceCache
			return res, nil
		}
	}
	if ix := r.fetch(ctx, base, log, warn); ix != nil {
		res.Index, res.Source = ix, SourceRegistry
		r.store(ix, warn)
		return res, nil
	}
	log.Info("reading the base once to index it", "base", base.String())
	opts := r.Build
	if opts.Progress == nil {
		opts.Progress = func(layer, layers int, read int64) {
			log.Debug("base layer indexed", "base", base.String(), "layer", layer, "layers", layers, "bytesRead", read)
		}
	}
	ix, st, err := Build(ctx, img, opts)
	if err != nil && opts.Parent != nil && ctx.Err() == nil {
		// A later layer needs what the parent's tree leaves out (a
		// hardlink into the ostree object store): read every layer.
		log.Info("base index: the parent's tree does not do, reading every layer", "base", base.String(), "error", err.Error())
		opts.Parent = nil
		ix, st, err = Build(ctx, img, opts)
	}
	if err != nil {
		return nil, err
	}
	res.Index, res.Source, res.Stats = ix, SourceBuilt, st
	r.store(ix, warn)
	return res, nil
}

// fetch looks for the artifact of base in Elsewhere, then in Repository
// (each once), and returns the first usable one, or nil.
func (r *Resolver) fetch(ctx context.Context, base v1.Hash, log *slog.Logger, warn func(string)) *Index {
	repos := append([]name.Repository(nil), r.Elsewhere...)
	if r.Repository != nil {
		repos = append(repos, *r.Repository)
	}
	seen := map[string]bool{}
	for _, repo := range repos {
		if seen[repo.String()] {
			continue
		}
		seen[repo.String()] = true
		ix, err := Fetch(ctx, repo, base, r.Remote...)
		switch {
		case denied(err):
			// A repository the credentials cannot read yet (some
			// registries answer so for one that does not exist).
			log.Info("base index artifact not readable", "repository", repo.String(), "error", err.Error())
		case err != nil:
			warn(fmt.Sprintf("base index artifact in %s unusable: %v", repo, err))
		case ix != nil:
			log.Info("base index found in the registry", "repository", repo.String())
			return ix
		}
	}
	return nil
}

func (r *Resolver) store(ix *Index, warn func(string)) {
	if r.Cache == nil {
		return
	}
	if err := r.Cache.Store(ix); err != nil {
		warn(fmt.Sprintf("base index not cached: %v", err))
	}
}

// Publish writes ix to Repository (see Publish); without a Repository it
// does nothing.
func (r *Resolver) Publish(ctx context.Context, ix *Index) error {
	if r.Repository == nil {
		return nil
	}
	return Publish(ctx, *r.Repository, ix, r.Remote...)
}
