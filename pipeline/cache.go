package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/sources/imageref"
)

// Cache is what the builds of one run (a fleet) share while they are
// prepared and built: each base resolved and indexed once for every
// build that names it, each base's platform list (arch all) read once,
// one imageRef reader per platform (a file many pools name is read
// once), the blobs the target repositories are known to hold and the
// connections to them, and which target repositories got a base's index
// artifact. It serves the specifications of one run: one registry
// configuration, one index cache and one set of imageRef bounds (those
// of the first specification that needs them). The zero Cache is ready
// to use; Close closes its readers.
type Cache struct {
	mu        sync.Mutex
	bases     map[string]*baseEntry
	platLists map[string]*platformsEntry
	readers   map[string]*imageref.Reader
	repoIdx   map[string]bool
	// Known and sessions are the publishers' (publish.WithKnownBlobs,
	// publish.WithSessions).
	known    publish.KnownBlobs
	sessions publish.Sessions
}

// CacheEntry is one thing a Cache resolved once for several builds (a
// base and its index, a base's platforms), with what it cost.
type CacheEntry struct {
	// What is "base" or "platforms"; Ref the base as given.
	What    string
	Ref     string
	Digest  string
	Builds  int
	Seconds float64
	// Index is the base index's source ("cache", "registry", "built").
	Index string
	Err   error
}

type baseEntry struct {
	once  sync.Once
	base  *assemble.Base
	entry CacheEntry
	step  string
}

type platformsEntry struct {
	once      sync.Once
	platforms []v1.Platform
	entry     CacheEntry
}

// Entries lists what the cache resolved (bases, then platform lists).
func (c *Cache) Entries() []CacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []CacheEntry
	for _, b := range c.bases {
		out = append(out, b.entry)
	}
	for _, l := range c.platLists {
		out = append(out, l.entry)
	}
	return out
}

// Close closes the imageRef readers.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.readers {
		r.Close()
	}
	c.readers = nil
}

// base resolves a base reference for arch (and indexes it unless mode is
// off) once for every build that names it; repo is where the first build
// looks for the index artifact. A failure is a specification Error of
// the step ("base", "base-index").
func (c *Cache) base(ctx context.Context, ref, arch, mode string, o assemble.IndexOptions) (*assemble.Base, error) {
	key := ref + "\x00" + registry.NormalizeArch(arch) + "\x00" + mode
	e := entry(&c.mu, &c.bases, key, func(e *baseEntry) { e.entry = CacheEntry{What: "base", Ref: ref} },
		func(e *baseEntry) { e.entry.Builds++ })
	e.once.Do(func() {
		start := time.Now()
		defer func() { e.entry.Seconds = time.Since(start).Seconds() }()
		b, err := assemble.ResolveBaseCached(ctx, ref, o.Registry, arch, o.CacheDir)
		if err != nil {
			e.step, e.entry.Err = "base", err
			return
		}
		e.entry.Digest = b.Digest.String()
		if mode != assemble.BaseIndexOff {
			info, err := assemble.IndexBase(ctx, b, o)
			if err != nil {
				e.step, e.entry.Err = "base-index", fmt.Errorf("%w (baseIndex: off builds without reading the base)", err)
				return
			}
			e.entry.Index = info.Source
		}
		e.base = b
	})
	if e.entry.Err != nil {
		return nil, specErr(e.step, "", e.entry.Err)
	}
	return e.base, nil
}

// platforms resolves a multi-platform request's architectures to
// platforms: ArchAll reads the base's index once for every build that
// names it.
func (c *Cache) platforms(ctx context.Context, req assemble.Request) ([]v1.Platform, error) {
	if !req.Arch.All() {
		return req.Platforms(ctx)
	}
	e := entry(&c.mu, &c.platLists, req.Base, func(e *platformsEntry) { e.entry = CacheEntry{What: "platforms", Ref: req.Base} },
		func(e *platformsEntry) { e.entry.Builds++ })
	e.once.Do(func() {
		start := time.Now()
		e.platforms, e.entry.Err = req.Platforms(ctx)
		e.entry.Seconds = time.Since(start).Seconds()
	})
	return e.platforms, e.entry.Err
}

// images returns the imageRef reader of platform p (nil: the default
// platform), made on first use with reg and the bounds lim.
func (c *Cache) images(p *v1.Platform, reg *registry.Options, lim *ImageRefs) *imageref.Reader {
	key := ""
	if p != nil {
		key = p.String()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readers == nil {
		c.readers = map[string]*imageref.Reader{}
	}
	if c.readers[key] == nil {
		c.readers[key] = imageref.New(reg, imageRefOptions(lim, p)...)
	}
	return c.readers[key]
}

// firstInRepo reports whether this is the first build onto base (by
// digest) to push into repo: the base index artifact goes there once.
func (c *Cache) firstInRepo(repo string, base *assemble.Base) bool {
	key := repo + "@" + base.Digest.String()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.repoIdx == nil {
		c.repoIdx = map[string]bool{}
	}
	if c.repoIdx[key] {
		return false
	}
	c.repoIdx[key] = true
	return true
}

// publishOptions are the publisher's options of a build that shares the
// cache: known blobs and connections.
func (c *Cache) publishOptions() []publish.Option {
	return []publish.Option{publish.WithKnownBlobs(&c.known), publish.WithSessions(&c.sessions)}
}

// entry returns (*m)[key] under mu, made (and set up by init) when
// missing; each, when set, runs on it under mu.
func entry[T any](mu *sync.Mutex, m *map[string]*T, key string, init, each func(*T)) *T {
	mu.Lock()
	defer mu.Unlock()
	if *m == nil {
		*m = map[string]*T{}
	}
	e, ok := (*m)[key]
	if !ok {
		e = new(T)
		if init != nil {
			init(e)
		}
		(*m)[key] = e
	}
	if each != nil {
		each(e)
	}
	return e
}
