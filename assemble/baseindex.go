package assemble

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/internal/registry"
)

// Base index modes (Request.BaseIndex).
const (
	// BaseIndexAuto resolves the base's index (disk cache, the artifact in
	// the target repository, else one read of the base's layers) and hands
	// its tree to the renderer. The default.
	BaseIndexAuto = "auto"
	// BaseIndexOff never reads the base: the renderer enables units the
	// OS ships with its documented fallback, and the result says so.
	BaseIndexOff = "off"
)

// IndexOptions say where a base index is looked for and kept: the disk
// cache, then the artifact next to the base (in the repository it is read
// from), then in Repository, else the base is read once.
type IndexOptions struct {
	// CacheDir is the disk cache (baseindex.Cache); "" means none.
	CacheDir string
	// Repository is a registry repository ("REG/REPO") whose artifact
	// "sha256-<hex>.baseindex" is read before the base is, and where
	// PublishIndex writes it; "" means none.
	Repository string
	// Registry reaches Repository; nil means the zero Options.
	Registry *registry.Options
	// Logger receives progress and warnings; nil discards them.
	Logger *slog.Logger
	// Parent is the index of the image the base was built on (the
	// official base of a package base): indexing the base then reads only
	// the layers it added (baseindex.Options.Parent).
	Parent *baseindex.Index
}

// IndexInfo says which base index a build used.
type IndexInfo struct {
	// Digest is the index's own digest, Base the base manifest digest.
	Digest string `json:"digest"`
	Base   string `json:"base"`
	// Source is "cache", "registry", "built", "shared" (a concurrent build
	// on the same base in this process read it) or "given" (resolved by
	// the caller and shared).
	Source string `json:"source"`
	// BytesRead counts the compressed base layer bytes read (0 unless
	// built).
	BytesRead int64    `json:"bytesRead"`
	Entries   int      `json:"entries"`
	Kernels   []string `json:"kernels,omitempty"`
	// Published is set when the build wrote the index's artifact.
	Published string `json:"published,omitempty"`
	// Warnings are problems that did not stop the resolution.
	Warnings []string `json:"warnings,omitempty"`
}

func (o IndexOptions) resolver(ctx context.Context) (*baseindex.Resolver, error) {
	reg := registryOptions(o.Registry)
	// The base's layers are read as many at once as an image's blob
	// requests go (registry.Options.Requests): across a WAN reading a
	// small layer is mostly waiting for the registry's answer.
	r := &baseindex.Resolver{Logger: o.Logger, Build: baseindex.Options{Parent: o.Parent, Jobs: reg.RequestJobs()}}
	if o.CacheDir != "" {
		r.Cache = &baseindex.Cache{Dir: o.CacheDir}
	}
	if o.Repository != "" {
		var nopts []name.Option
		if reg.IsInsecure(registryHost(o.Repository)) {
			nopts = append(nopts, name.Insecure)
		}
		repo, err := name.NewRepository(o.Repository, nopts...)
		if err != nil {
			return nil, fmt.Errorf("base index repository %q: %w", o.Repository, err)
		}
		r.Repository = &repo
		r.Remote = reg.RemoteOptions(ctx)
	}
	return r, nil
}

// baseRepository is the repository base was read from, where a pipeline
// that mirrors or promotes bases publishes their indexes (oslayer
// base-index publish); false for a base in a layout.
func baseRepository(base *Base, reg *registry.Options) (name.Repository, bool) {
	if base.Ref == "" || registry.IsLayout(base.Ref) {
		return name.Repository{}, false
	}
	ref, err := registryOptions(reg).ParseReference(base.Ref)
	if err != nil {
		return name.Repository{}, false
	}
	return ref.Context(), true
}

func registryOptions(reg *registry.Options) *registry.Options {
	if reg == nil {
		return &registry.Options{}
	}
	return reg
}

func registryHost(repo string) string {
	for i, c := range repo {
		if c == '/' {
			return repo[:i]
		}
	}
	return repo
}

// IndexBase resolves the index of base (a no-op when base.Index is set)
// and records it on base, so that many builds on one base share it: the
// pipeline's Cache calls it once and hands base over in
// Request.Prepared.
func IndexBase(ctx context.Context, base *Base, o IndexOptions) (*IndexInfo, error) {
	if base.Index != nil {
		return indexInfo(base.Index, "given", 0), nil
	}
	r, err := o.resolver(ctx)
	if err != nil {
		return nil, err
	}
	if repo, ok := baseRepository(base, o.Registry); ok {
		r.Elsewhere = append(r.Elsewhere, repo)
		if r.Remote == nil {
			r.Remote = registryOptions(o.Registry).RemoteOptions(ctx)
		}
	}
	res, err := r.Resolve(ctx, base.Image)
	if err != nil {
		return nil, fmt.Errorf("base %s: %w", base.Ref, err)
	}
	base.Index = res.Index
	info := indexInfo(res.Index, string(res.Source), res.Stats.BytesRead)
	info.Warnings = res.Warnings
	return info, nil
}

// PublishIndex writes the index of base to o.Repository (nothing when
// either is unset, or the repository has it already).
func PublishIndex(ctx context.Context, base *Base, o IndexOptions) error {
	if base.Index == nil || o.Repository == "" {
		return nil
	}
	r, err := o.resolver(ctx)
	if err != nil {
		return err
	}
	return r.Publish(ctx, base.Index)
}

func indexInfo(ix *baseindex.Index, source string, read int64) *IndexInfo {
	return &IndexInfo{Digest: ix.Digest, Base: ix.Base.String(), Source: source, BytesRead: read,
		Entries: len(ix.Entries), Kernels: ix.Kernels}
}
