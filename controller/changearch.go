package controller

import (
	"context"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/diff"
	"github.com/oslayer/oslayer/internal/registry"
)

// A multi-platform image is an index of one image per architecture; a
// node boots its architecture's. Whether the pool's nodes see a change is
// the question for every architecture, so each platform of the built
// index is compared with the same platform of the published image and the
// results merged (mergeChanges).

// ArchResult is one architecture's comparison: Result is nil when the
// published image has no image of that platform (Added).
type ArchResult struct {
	// Arch names the platform (diff.ArchName).
	Arch   string
	Result *diff.Result
	// Added: the published image lacks the platform; AddedBytes and
	// AddedLayers are the whole built image of it.
	Added       bool
	AddedBytes  int64
	AddedLayers int
}

// compareArches compares every platform of the built index with the same
// platform of the published image (an index, or one image of its own
// platform). On an error the change returned still names the
// architectures of the built image.
func compareArches(ctx context.Context, reg *registry.Options, from, to string, platforms []v1.Platform, opts diff.Options) (*v1alpha1.ImageChange, error) {
	ch := &v1alpha1.ImageChange{From: from, To: to}
	for _, p := range platforms {
		ch.Architectures = append(ch.Architectures, v1alpha1.ArchChange{Architecture: diff.ArchName(p)})
	}
	old, err := diff.Platforms(ctx, reg, from)
	if err != nil {
		return ch, fmt.Errorf("reading the published image: %w", err)
	}
	results := make([]ArchResult, 0, len(platforms))
	for _, p := range platforms {
		ar, err := compareArch(ctx, reg, from, to, p, old, opts)
		if err != nil {
			return ch, fmt.Errorf("%s: %w", diff.ArchName(p), err)
		}
		results = append(results, ar)
	}
	return MergeChanges(from, to, results), nil
}

// compareArch compares platform p of both images; a platform the
// published image (of platforms old) lacks is Added.
func compareArch(ctx context.Context, reg *registry.Options, from, to string, p v1.Platform, old []v1.Platform, opts diff.Options) (ArchResult, error) {
	ar := ArchResult{Arch: diff.ArchName(p)}
	if o, ok := diff.FindPlatform(old, p); ok {
		res, err := compareOne(ctx, reg, from, to, &o, &p, opts)
		ar.Result = res
		return ar, err
	}
	built, err := diff.LoadImage(ctx, reg, to, &p)
	if err != nil {
		return ar, fmt.Errorf("reading the built image: %w", err)
	}
	ar.Added, ar.AddedLayers = true, len(built.Layers)
	for _, l := range built.Layers {
		ar.AddedBytes += l.Size
	}
	return ar, nil
}
