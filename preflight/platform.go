package preflight

import (
	"context"
	"fmt"

	"github.com/oslayer/oslayer/internal/registry"
)

// platformCheck: the config's os/architecture must be linux, equal the arch built for
// and equal the base's.
type platformCheck struct{}

func (platformCheck) Name() string       { return "platform" }
func (platformCheck) Severity() Severity { return Error }
func (platformCheck) Needs() Needs       { return 0 }

// NormalizeArch maps kernel/RPM architecture names to OCI ones
// (x86_64 → amd64, aarch64 → arm64); others are returned unchanged.
func NormalizeArch(a string) string { return registry.NormalizeArch(a) }

func platformString(os, arch, variant string) string {
	s := os + "/" + arch
	if variant != "" {
		s += "/" + variant
	}
	return s
}

func (c platformCheck) Run(_ context.Context, t *Target) ([]Finding, error) {
	var out []Finding
	cfg := t.Config
	have := platformString(cfg.OS, cfg.Architecture, cfg.Variant)
	if cfg.OS != "linux" {
		out = append(out, Finding{Message: fmt.Sprintf("config os is %q, want \"linux\"", cfg.OS)})
	}
	if cfg.Architecture == "" {
		out = append(out, Finding{Message: "config has no architecture: nodes compare it with their own and refuse the image"})
	}
	if want := NormalizeArch(t.Options.Arch); want != "" && cfg.Architecture != "" && cfg.Architecture != want {
		out = append(out, Finding{Field: "arch", Message: fmt.Sprintf("image is %s but nodes are %s (arch %s): build from the %s variant of the base", have, want, t.Options.Arch, want)})
	}
	if _, bc, ref := t.base(); bc != nil {
		bp := platformString(bc.OS, bc.Architecture, bc.Variant)
		if bp != have {
			out = append(out, Finding{Message: fmt.Sprintf("image is %s but its base %s is %s", have, ref, bp)})
		}
	}
	return out, nil
}
