package diff

import (
	"fmt"
	"io"
	"strings"

	"github.com/oslayer/oslayer/render"
)

// WriteText writes the diff for people: the sides, the base, kernel
// arguments and package stage, every changed path with its sources, the
// download, and the action per platform.
func (r *Result) WriteText(w io.Writer) {
	fmt.Fprintf(w, "OLD %s\nNEW %s\n", sideLine(r.Old), sideLine(r.New))
	r.writeBase(w)
	if r.KernelArgs.Changed {
		fmt.Fprintf(w, "kernel arguments: %s -> %s\n", args(r.KernelArgs.Old), args(r.KernelArgs.New))
	}
	if r.Packages.Changed {
		fmt.Fprintf(w, "package stage: %s -> %s\n", pkgLine(r.Packages.OldKey, r.Packages.OldExtensions, r.Packages.OldKernelType),
			pkgLine(r.Packages.NewKey, r.Packages.NewExtensions, r.Packages.NewKernelType))
	}
	fmt.Fprintf(w, "paths: %d changed\n", len(r.Paths))
	for _, pc := range r.Paths {
		writePath(w, pc)
	}
	d := r.Download
	base := ""
	if !d.BaseKnown {
		base = " (rendered layers only: an input set has no base layers)"
	}
	fmt.Fprintf(w, "download: %s in %d of %d layers (OLD has %d)%s\n", bytesText(d.Bytes), d.Layers, d.NewLayers, d.OldLayers, base)
	for _, p := range r.Platforms {
		writePrediction(w, p)
	}
	fmt.Fprintf(w, "action: %s\n", r.Action)
}

func sideLine(s *Side) string {
	parts := []string{s.Given}
	if s.Digest != "" {
		parts = append(parts, "("+s.Digest+")")
	}
	if s.Pool != "" {
		parts = append(parts, "pool "+s.Pool)
	}
	if s.Arch != "" {
		parts = append(parts, s.Arch)
	}
	return strings.Join(parts, " ")
}

func (r *Result) writeBase(w io.Writer) {
	b := r.Base
	if !b.Changed {
		if b.NewDigest != "" {
			fmt.Fprintf(w, "base: %s %s (unchanged)\n", b.NewDigest, firstNonEmpty(b.NewOSVersion, b.OldOSVersion))
		}
		return
	}
	fmt.Fprintf(w, "base: %s %s -> %s %s\n", orDash(b.OldDigest), b.OldOSVersion, orDash(b.NewDigest), b.NewOSVersion)
	if r.Old.OSImageURL != r.New.OSImageURL {
		fmt.Fprintf(w, "osImageURL: %s -> %s\n", orDash(r.Old.OSImageURL), orDash(r.New.OSImageURL))
	}
}

func writePath(w io.Writer, pc PathChange) {
	kind := ""
	if pc.Systemd != "" {
		kind = " [" + pc.Systemd + "]"
	}
	what := ""
	if len(pc.What) > 0 {
		what = " (" + strings.Join(pc.What, ", ") + ")"
	}
	fmt.Fprintf(w, "  %-7s %s%s%s\n", pc.Change, pc.Path, kind, what)
	if pc.Old != nil {
		fmt.Fprintf(w, "          OLD %s from %s\n", itemText(pc.Old), strings.TrimSpace(pc.Old.Source.String()))
	}
	if pc.New != nil {
		fmt.Fprintf(w, "          NEW %s from %s\n", itemText(pc.New), strings.TrimSpace(pc.New.Source.String()))
	}
}

func itemText(it *render.ManifestItem) string {
	s := fmt.Sprintf("%s %s %d:%d", it.Type, it.Mode, it.UID, it.GID)
	if it.Target != "" {
		s += " -> " + it.Target
	}
	if it.SHA256 != "" {
		s += " sha256:" + it.SHA256[:min(12, len(it.SHA256))]
	}
	return s
}

func writePrediction(w io.Writer, p Prediction) {
	applies := ""
	if !p.Applies {
		applies = " (inputs are not for this platform)"
	}
	drain := ""
	if p.Drain && p.Action != None {
		drain = ", drain"
	}
	if p.Refused {
		drain += " (refused by the MCO: the pool degrades, no node takes it in place)"
	}
	fmt.Fprintf(w, "%s: %s%s%s\n", p.Platform, p.Action, drain, applies)
	if len(p.MCOActions) > 0 {
		fmt.Fprintf(w, "  daemon actions: %s (first boot: %s)\n", strings.Join(p.MCOActions, ", "), strings.Join(p.LegacyActions, ", "))
	}
	for _, r := range p.Rules {
		acts := ""
		if len(r.Actions) > 0 {
			acts = ": " + strings.Join(r.Actions, ", ")
		}
		fmt.Fprintf(w, "  %s: %s%s\n", r.Item, r.Rule, acts)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

func args(a []string) string {
	if len(a) == 0 {
		return "(none)"
	}
	return strings.Join(a, " ")
}

func pkgLine(key string, ext []string, kt string) string {
	if key != "" {
		return "key " + key
	}
	if len(ext) == 0 && canonicalKernelType(kt) == "default" {
		return "(none)"
	}
	return fmt.Sprintf("extensions [%s] kernelType %s", strings.Join(ext, " "), canonicalKernelType(kt))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// bytesText prints a size as bytes with a binary unit.
func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB (%d bytes)", float64(n)/(1<<30), n)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/(1<<10), n)
	}
	return fmt.Sprintf("%d bytes", n)
}
