package assemble

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/internal/registry"
)

// ArchAll (arch all) builds for every platform of the base's index.
const ArchAll = "all"

// Platforms are the architectures a build is for, parsed once where a
// front-end reads them (ParsePlatforms) and carried down as they are:
// none (the zero value: one image, amd64), one (that platform's image),
// several (one image per platform and an OCI index of them) or ArchAll
// alone (every platform of the base's index). x86_64 and aarch64 are
// amd64 and arm64; the names stay as given, for errors about the base.
type Platforms struct {
	given []string
}

// ParsePlatforms reads a comma-separated list of architectures ("" is
// none). Its errors name no field: the caller knows which one it read.
func ParsePlatforms(s string) (Platforms, error) {
	if s == "" {
		return Platforms{}, nil
	}
	var p Platforms
	var norm []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		n := registry.NormalizeArch(a)
		switch {
		case a == "":
			return Platforms{}, fmt.Errorf("%q: empty architecture", s)
		case n == ArchAll && strings.Contains(s, ","):
			return Platforms{}, fmt.Errorf("%q: %q stands alone", s, ArchAll)
		case slices.Contains(norm, n):
			return Platforms{}, fmt.Errorf("%q: %s given twice", s, n)
		}
		p.given, norm = append(p.given, a), append(norm, n)
	}
	return p, nil
}

// OnePlatform is the platform arch alone ("": none).
func OnePlatform(arch string) Platforms {
	if arch == "" {
		return Platforms{}
	}
	return Platforms{given: []string{arch}}
}

// Multi reports whether the build is one image per platform and an index
// of them: several architectures, or ArchAll.
func (p Platforms) Multi() bool { return len(p.given) > 1 || p.All() }

// All reports whether the build is for every platform of the base's
// index.
func (p Platforms) All() bool {
	return len(p.given) == 1 && registry.NormalizeArch(p.given[0]) == ArchAll
}

// Arch is a single-platform build's architecture as given ("": none, or a
// multi-platform build).
func (p Platforms) Arch() string {
	if len(p.given) != 1 || p.All() {
		return ""
	}
	return p.given[0]
}

// Given are the architectures as given.
func (p Platforms) Given() []string { return slices.Clone(p.given) }

// Normalized are the architectures with x86_64, aarch64 as amd64, arm64
// (nil for none).
func (p Platforms) Normalized() []string {
	var out []string
	for _, a := range p.given {
		out = append(out, registry.NormalizeArch(a))
	}
	return out
}

// String is the list as given, comma-separated.
func (p Platforms) String() string { return strings.Join(p.given, ",") }

// Resolve returns the platforms to build, in index order: ArchAll reads
// the index of base through reg.
func (p Platforms) Resolve(ctx context.Context, base string, reg *registry.Options) ([]v1.Platform, error) {
	if p.All() {
		if base == "" {
			return nil, fmt.Errorf("arch %s: no base (the platforms are those of the base's index)", ArchAll)
		}
		if reg == nil {
			reg = &registry.Options{}
		}
		ps, err := reg.Platforms(ctx, base)
		if err != nil {
			return nil, fmt.Errorf("base %s: arch %s: %w", base, ArchAll, err)
		}
		return ps, nil
	}
	var ps []v1.Platform
	for _, a := range p.Normalized() {
		pl := registry.DefaultPlatform
		pl.Architecture = a
		ps = append(ps, pl)
	}
	if ps == nil {
		ps = []v1.Platform{registry.DefaultPlatform}
	}
	return ps, nil
}
