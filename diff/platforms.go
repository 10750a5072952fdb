package diff

import (
	"context"
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/internal/registry"
)

// ImagePlatforms lists the platforms of ref when it names a
// multi-platform index, in index order, without reading any image; nil
// when ref names one image.
func ImagePlatforms(ctx context.Context, reg *registry.Options, ref string) ([]v1.Platform, error) {
	ps, err := reg.Platforms(ctx, ref)
	if errors.Is(err, registry.ErrNotIndex) {
		return nil, nil
	}
	return ps, err
}

// ImagePlatform is the platform of the image ref names (its config's OS,
// architecture and variant); for an index, of its image for platform.
func ImagePlatform(ctx context.Context, reg *registry.Options, ref string, platform *v1.Platform) (v1.Platform, error) {
	img, _, err := reg.Image(ctx, ref, platform)
	if err != nil {
		return v1.Platform{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Platform{}, fmt.Errorf("image %s: config: %w", ref, err)
	}
	return v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}, nil
}

// Platforms are the platforms of ref: its index's, in index order, or
// the one of a single image.
func Platforms(ctx context.Context, reg *registry.Options, ref string) ([]v1.Platform, error) {
	ps, err := ImagePlatforms(ctx, reg, ref)
	if err != nil || ps != nil {
		return ps, err
	}
	p, err := ImagePlatform(ctx, reg, ref, nil)
	if err != nil {
		return nil, err
	}
	return []v1.Platform{p}, nil
}

// FindPlatform is the platform of ps that is p (SamePlatform).
func FindPlatform(ps []v1.Platform, p v1.Platform) (v1.Platform, bool) {
	for _, o := range ps {
		if SamePlatform(o, p) {
			return o, true
		}
	}
	return v1.Platform{}, false
}

// ArchName names a platform by its architecture, with its variant
// ("arm64", "arm/v7"), and its OS when that is not linux
// ("windows/amd64").
func ArchName(p v1.Platform) string {
	s := p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	if p.OS != "" && p.OS != "linux" {
		s = p.OS + "/" + s
	}
	return s
}

// SamePlatform reports whether a and b are one platform: the same OS and
// architecture, and the same variant unless one of them names none.
func SamePlatform(a, b v1.Platform) bool {
	return a.OS == b.OS && a.Architecture == b.Architecture &&
		(a.Variant == "" || b.Variant == "" || a.Variant == b.Variant)
}
