package diff

import (
	"path"
	"sort"
	"strings"

	"github.com/oslayer/oslayer/render"
)

// PathChange is one node path added, changed or removed.
type PathChange struct {
	Path string `json:"path"`
	// Change is "added", "changed" or "removed".
	Change string `json:"change"`
	// What lists what changed: type, content, mode, owner, target.
	What []string `json:"what,omitempty"`
	// Systemd says what the path is to systemd: "unit", "drop-in",
	// "enablement" (a .wants/.requires link), "mask" (a link to
	// /dev/null), or "" for other files.
	Systemd string               `json:"systemd,omitempty"`
	Old     *render.ManifestItem `json:"old,omitempty"`
	New     *render.ManifestItem `json:"new,omitempty"`
}

// item returns the entry that describes the change now: the new one, or
// the removed one.
func (c PathChange) item() *render.ManifestItem {
	if c.New != nil {
		return c.New
	}
	return c.Old
}

// ComparePaths lists every path that differs between the two ownership
// manifests, sorted by path. The manifest itself is left out (it changes
// with everything).
func ComparePaths(old, new []render.ManifestItem) []PathChange {
	o, n := byPath(old), byPath(new)
	var out []PathChange
	for p, oi := range o {
		ni, ok := n[p]
		switch {
		case !ok:
			out = append(out, PathChange{Path: p, Change: "removed", Old: oi})
		default:
			if what := changed(oi, ni); len(what) > 0 {
				out = append(out, PathChange{Path: p, Change: "changed", What: what, Old: oi, New: ni})
			}
		}
	}
	for p, ni := range n {
		if _, ok := o[p]; !ok {
			out = append(out, PathChange{Path: p, Change: "added", New: ni})
		}
	}
	for i := range out {
		out[i].Systemd = systemdRole(*out[i].item())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func byPath(items []render.ManifestItem) map[string]*render.ManifestItem {
	m := make(map[string]*render.ManifestItem, len(items))
	for i := range items {
		if items[i].Path == render.ManifestPath {
			continue
		}
		m[items[i].Path] = &items[i]
	}
	return m
}

// changed names the properties a node sees that differ.
func changed(o, n *render.ManifestItem) []string {
	var what []string
	if o.Type != n.Type {
		what = append(what, "type")
	}
	if o.SHA256 != n.SHA256 {
		what = append(what, "content")
	}
	if o.Mode != n.Mode {
		what = append(what, "mode")
	}
	if o.UID != n.UID || o.GID != n.GID {
		what = append(what, "owner")
	}
	if o.Target != n.Target {
		what = append(what, "target")
	}
	if o.StoredAt != n.StoredAt {
		what = append(what, "storage")
	}
	if len(what) == 0 && o.Ignition != "" && n.Ignition != "" && o.Ignition != n.Ignition {
		// Same node file, another Ignition entry (data URL encoding,
		// compression, overwrite): the daemon compares entries whole.
		what = append(what, "ignition entry")
	}
	return what
}

// systemdRole says what a path is to systemd.
func systemdRole(it render.ManifestItem) string {
	dir := path.Dir(it.Path)
	if !strings.Contains(dir, "/systemd/") {
		return ""
	}
	switch {
	case it.Target == "/dev/null":
		return "mask"
	case strings.HasSuffix(dir, ".wants") || strings.HasSuffix(dir, ".requires") || strings.HasSuffix(dir, ".upholds"):
		return "enablement"
	case strings.HasSuffix(dir, ".d"):
		return "drop-in"
	case strings.HasSuffix(dir, "/system") || strings.HasSuffix(dir, "/user"):
		return "unit"
	}
	return ""
}

// unitName is the unit a systemd path belongs to: the link or file name,
// or NAME of a NAME.d drop-in directory.
func unitName(p string) string {
	dir := path.Dir(p)
	if strings.HasSuffix(dir, ".d") && !strings.HasSuffix(dir, ".wants") {
		return strings.TrimSuffix(path.Base(dir), ".d")
	}
	return path.Base(p)
}
