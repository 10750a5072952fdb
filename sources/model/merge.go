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
	m := &merger{out: &Config{}, paths: map[string]claim{}, units: map[string]int{}}
	for _, c := range cfgs {
		if c == nil {
			continue
		}
		m.files(c.Files)
		m.dirs(c.Dirs)
		m.links(c.Links)
		m.addUnits(c.Units)
		m.runtime(c.Runtime)
		m.scalars(c)
	}
	if len(m.errs) > 0 {
		return nil, errors.Join(m.errs...)
	}
	return m.out, nil
}

// claim is the first claim of a node path.
type claim struct {
	kind   string // "file", "dir", "link", "runtime"
	idx    int
	origin Origin
}

// merger is the state of one Merge: the merged config, who claimed each
// path and unit first, and the conflicts found.
type merger struct {
	out                         *Config
	paths                       map[string]claim
	units                       map[string]int
	errs                        []error
	kernelTypeFrom, osImageFrom Origin
}

func (m *merger) conflict(what string, a, b Origin, detail string) {
	m.errs = append(m.errs, fmt.Errorf("conflicting definitions of %s: %s and %s (%s)", what, a, b, detail))
}

// claimed reports whether path was claimed before (ok) and, when the
// earlier claim is of the same kind, its index (same); a claim of another
// kind is a conflict.
func (m *merger) claimed(path, kind, noun string, o Origin) (idx int, same, ok bool) {
	prev, ok := m.paths[path]
	if ok && prev.kind != kind {
		m.conflict(path, prev.origin, o, "a "+prev.kind+" and a "+noun)
		return 0, false, true
	}
	return prev.idx, ok, ok
}

func (m *merger) files(fs []File) {
	for _, f := range fs {
		if i, same, ok := m.claimed(f.Path, "file", "file", f.Origin); ok {
			if p := m.out.Files; same {
				if d := fileDiff(p[i], f); d != "" {
					m.conflict(f.Path, p[i].Origin, f.Origin, d)
				}
			}
			continue
		}
		m.paths[f.Path] = claim{"file", len(m.out.Files), f.Origin}
		m.out.Files = append(m.out.Files, f)
	}
}

func (m *merger) dirs(ds []Dir) {
	for _, d := range ds {
		if i, same, ok := m.claimed(d.Path, "dir", "directory", d.Origin); ok {
			if p := m.out.Dirs; same && (p[i].Mode != d.Mode || p[i].UID != d.UID || p[i].GID != d.GID) {
				m.conflict(d.Path, p[i].Origin, d.Origin, fmt.Sprintf("mode/owner %04o %d:%d vs %04o %d:%d", p[i].Mode, p[i].UID, p[i].GID, d.Mode, d.UID, d.GID))
			}
			continue
		}
		m.paths[d.Path] = claim{"dir", len(m.out.Dirs), d.Origin}
		m.out.Dirs = append(m.out.Dirs, d)
	}
}

func (m *merger) links(ls []Link) {
	for _, l := range ls {
		if i, same, ok := m.claimed(l.Path, "link", "link", l.Origin); ok {
			if p := m.out.Links; same && (p[i].Target != l.Target || p[i].Hard != l.Hard || p[i].UID != l.UID || p[i].GID != l.GID) {
				m.conflict(l.Path, p[i].Origin, l.Origin, fmt.Sprintf("link to %q vs %q", p[i].Target, l.Target))
			}
			continue
		}
		m.paths[l.Path] = claim{"link", len(m.out.Links), l.Origin}
		m.out.Links = append(m.out.Links, l)
	}
}

func (m *merger) addUnits(us []Unit) {
	for _, u := range us {
		if i, ok := m.units[u.Name]; ok {
			if d := unitDiff(m.out.Units[i], u); d != "" {
				m.conflict("unit "+u.Name, m.out.Units[i].Origin, u.Origin, d)
			}
			continue
		}
		m.units[u.Name] = len(m.out.Units)
		u.DropIns = append([]DropIn(nil), u.DropIns...)
		m.out.Units = append(m.out.Units, u)
	}
}

// runtime keeps every runtime-delivered item; a node path delivered at
// runtime must not also be baked (the same path delivered twice is
// reported twice).
func (m *merger) runtime(rs []Runtime) {
	for _, r := range rs {
		if strings.HasPrefix(r.Item, "/") {
			if prev, ok := m.paths[r.Item]; ok {
				if prev.kind != "runtime" {
					m.conflict(r.Item, prev.origin, r.Origin, "a baked "+prev.kind+" and a runtime-delivered item")
				}
			} else {
				m.paths[r.Item] = claim{"runtime", len(m.out.Runtime), r.Origin}
			}
		}
		m.out.Runtime = append(m.out.Runtime, r)
	}
}

// scalars concatenates the lists and checks that kernelType and
// osImageURL agree.
func (m *merger) scalars(c *Config) {
	out := m.out
	out.KernelArgs = append(out.KernelArgs, c.KernelArgs...)
	out.Extensions = append(out.Extensions, c.Extensions...)
	if c.KernelType != "" {
		if out.KernelType != "" && out.KernelType != c.KernelType {
			m.errs = append(m.errs, fmt.Errorf("conflicting kernelType %q (%s) and %q", out.KernelType, m.kernelTypeFrom.Document, c.KernelType))
		}
		out.KernelType = c.KernelType
		if len(c.Inputs) > 0 {
			m.kernelTypeFrom = Origin{Document: c.Inputs[0].Path}
		}
	}
	if c.OSImageURL != "" {
		if out.OSImageURL != "" && out.OSImageURL != c.OSImageURL {
			m.errs = append(m.errs, fmt.Errorf("conflicting osImageURL %q (%s) and %q", out.OSImageURL, m.osImageFrom.Document, c.OSImageURL))
		}
		out.OSImageURL = c.OSImageURL
		if len(c.Inputs) > 0 {
			m.osImageFrom = Origin{Document: c.Inputs[0].Path}
		}
	}
	out.Warnings = append(out.Warnings, c.Warnings...)
	out.Inputs = append(out.Inputs, c.Inputs...)
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
