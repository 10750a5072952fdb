package model

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Merge combines configurations, typically one from Gardener OSCs and one
// from MachineConfigs, or the per-document configs of one source. An item
// claimed more than once (a node path as file, directory, link or
// runtime-delivered item, or a unit name) is kept once when every claim
// has the same content, mode and owner; a claim with different content is an
// error that names both origins. Kernel arguments, extensions, runtime
// items, warnings and inputs are concatenated in order; KernelType and
// OSImageURL must agree when more than one config sets them.
//
// Merge never modifies its arguments; nil configs are skipped.
func Merge(cfgs ...*Config) (*Config, error) {
	out := &Config{}
	type claim struct {
		kind   string // "file", "dir", "link", "runtime"
		idx    int
		origin Origin
	}
	paths := map[string]claim{}
	units := map[string]int{}
	var errs []error
	conflict := func(what string, a, b Origin, detail string) {
		errs = append(errs, fmt.Errorf("conflicting definitions of %s: %s and %s (%s)", what, a, b, detail))
	}
	var kernelTypeFrom, osImageFrom Origin
	for _, c := range cfgs {
		if c == nil {
			continue
		}
		for _, f := range c.Files {
			if prev, ok := paths[f.Path]; ok {
				if prev.kind != "file" {
					conflict(f.Path, prev.origin, f.Origin, "a "+prev.kind+" and a file")
					continue
				}
				p := out.Files[prev.idx]
				if d := fileDiff(p, f); d != "" {
					conflict(f.Path, p.Origin, f.Origin, d)
				}
				continue
			}
			paths[f.Path] = claim{"file", len(out.Files), f.Origin}
			out.Files = append(out.Files, f)
		}
		for _, d := range c.Dirs {
			if prev, ok := paths[d.Path]; ok {
				if prev.kind != "dir" {
					conflict(d.Path, prev.origin, d.Origin, "a "+prev.kind+" and a directory")
					continue
				}
				p := out.Dirs[prev.idx]
				if p.Mode != d.Mode || p.UID != d.UID || p.GID != d.GID {
					conflict(d.Path, p.Origin, d.Origin, fmt.Sprintf("mode/owner %04o %d:%d vs %04o %d:%d", p.Mode, p.UID, p.GID, d.Mode, d.UID, d.GID))
				}
				continue
			}
			paths[d.Path] = claim{"dir", len(out.Dirs), d.Origin}
			out.Dirs = append(out.Dirs, d)
		}
		for _, l := range c.Links {
			if prev, ok := paths[l.Path]; ok {
				if prev.kind != "link" {
					conflict(l.Path, prev.origin, l.Origin, "a "+prev.kind+" and a link")
					continue
				}
				p := out.Links[prev.idx]
				if p.Target != l.Target || p.Hard != l.Hard || p.UID != l.UID || p.GID != l.GID {
					conflict(l.Path, p.Origin, l.Origin, fmt.Sprintf("link to %q vs %q", p.Target, l.Target))
				}
				continue
			}
			paths[l.Path] = claim{"link", len(out.Links), l.Origin}
			out.Links = append(out.Links, l)
		}
		for _, u := range c.Units {
			if i, ok := units[u.Name]; ok {
				if d := unitDiff(out.Units[i], u); d != "" {
					conflict("unit "+u.Name, out.Units[i].Origin, u.Origin, d)
				}
				continue
			}
			units[u.Name] = len(out.Units)
			u.DropIns = append([]DropIn(nil), u.DropIns...)
			out.Units = append(out.Units, u)
		}
		for _, r := range c.Runtime {
			if strings.HasPrefix(r.Item, "/") {
				if prev, ok := paths[r.Item]; ok {
					if prev.kind != "runtime" {
						conflict(r.Item, prev.origin, r.Origin, "a baked "+prev.kind+" and a runtime-delivered item")
					}
					// The same path delivered at runtime twice: report both.
				} else {
					paths[r.Item] = claim{"runtime", len(out.Runtime), r.Origin}
				}
			}
			out.Runtime = append(out.Runtime, r)
		}
		out.KernelArgs = append(out.KernelArgs, c.KernelArgs...)
		out.Extensions = append(out.Extensions, c.Extensions...)
		if c.KernelType != "" {
			if out.KernelType != "" && out.KernelType != c.KernelType {
				errs = append(errs, fmt.Errorf("conflicting kernelType %q (%s) and %q", out.KernelType, kernelTypeFrom.Document, c.KernelType))
			}
			out.KernelType = c.KernelType
			if len(c.Inputs) > 0 {
				kernelTypeFrom = Origin{Document: c.Inputs[0].Path}
			}
		}
		if c.OSImageURL != "" {
			if out.OSImageURL != "" && out.OSImageURL != c.OSImageURL {
				errs = append(errs, fmt.Errorf("conflicting osImageURL %q (%s) and %q", out.OSImageURL, osImageFrom.Document, c.OSImageURL))
			}
			out.OSImageURL = c.OSImageURL
			if len(c.Inputs) > 0 {
				osImageFrom = Origin{Document: c.Inputs[0].Path}
			}
		}
		out.Warnings = append(out.Warnings, c.Warnings...)
		out.Inputs = append(out.Inputs, c.Inputs...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func fileDiff(a, b File) string {
	switch {
	case !bytes.Equal(a.Data, b.Data):
		return fmt.Sprintf("different content: %d vs %d bytes", len(a.Data), len(b.Data))
	case a.Mode != b.Mode:
		return fmt.Sprintf("mode %04o vs %04o", a.Mode, b.Mode)
	case a.UID != b.UID || a.GID != b.GID:
		return fmt.Sprintf("owner %d:%d vs %d:%d", a.UID, a.GID, b.UID, b.GID)
	}
	return ""
}

func unitDiff(a, b Unit) string {
	switch {
	case (a.Contents == nil) != (b.Contents == nil):
		return "one has contents, the other not"
	case a.Contents != nil && *a.Contents != *b.Contents:
		return "different contents"
	case (a.Enabled == nil) != (b.Enabled == nil) || (a.Enabled != nil && *a.Enabled != *b.Enabled):
		return fmt.Sprintf("enabled %s vs %s", fmtBool(a.Enabled), fmtBool(b.Enabled))
	case a.Mask != b.Mask:
		return fmt.Sprintf("mask %t vs %t", a.Mask, b.Mask)
	case a.FileMode != b.FileMode:
		return fmt.Sprintf("unit file mode %04o vs %04o", a.FileMode, b.FileMode)
	case a.ClearDropIns != b.ClearDropIns:
		return fmt.Sprintf("drop-in directory cleared %t vs %t", a.ClearDropIns, b.ClearDropIns)
	case a.StartOnApply != b.StartOnApply:
		return fmt.Sprintf("started on apply %t vs %t", a.StartOnApply, b.StartOnApply)
	case len(a.DropIns) != len(b.DropIns):
		return fmt.Sprintf("%d vs %d drop-ins", len(a.DropIns), len(b.DropIns))
	}
	bd := map[string]string{}
	for _, d := range b.DropIns {
		bd[d.Name] = d.Contents
	}
	for _, d := range a.DropIns {
		c, ok := bd[d.Name]
		if !ok {
			return "drop-in " + d.Name + " only in one"
		}
		if c != d.Contents {
			return "drop-in " + d.Name + " differs"
		}
	}
	return ""
}

func fmtBool(b *bool) string {
	if b == nil {
		return "unset"
	}
	return fmt.Sprint(*b)
}
