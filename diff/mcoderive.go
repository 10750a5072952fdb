package diff

import (
	"slices"
	"sort"
	"strings"

	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/sources/machineconfig"
)

// Ignition fields of a MachineConfig, as the ownership manifest records
// them.
const (
	fieldFiles = "spec.config.storage.files["
	fieldUnits = "spec.config.systemd.units["
	fieldDirs  = "spec.config.storage.directories["
	fieldLinks = "spec.config.storage.links["
)

// deriveMCO turns a diff into the daemon's terms: the Ignition files and
// units behind the changed paths, passwd, and the always-reboot fields.
func deriveMCO(old, new *Side, paths []PathChange) MCOChange {
	var c MCOChange
	files, units, refused := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, pc := range paths {
		for _, it := range []*render.ManifestItem{pc.Old, pc.New} {
			if it != nil {
				classify(pc.Path, it, files, units, refused)
			}
		}
	}
	for _, p := range runtimePathChanges(old, new) {
		files[p] = true
	}
	c.Files, c.Units, c.Refused = sortedKeys(files), sortedKeys(units), sortedKeys(refused)
	c.Passwd = old.Passwd != new.Passwd
	if c.FIPS = old.FIPS != new.FIPS; c.FIPS {
		// reconcilable's checkFIPS: "refusing to modify FIPS on a running
		// cluster" (pkg/daemon/update.go).
		c.Refused = append(c.Refused, "fips")
	}
	c.OSImageURL = old.OSImageURL != new.OSImageURL || baseChanged(old, new)
	c.KernelArgs = !(len(old.KernelArgs) == 0 && len(new.KernelArgs) == 0) && !slices.Equal(old.KernelArgs, new.KernelArgs)
	c.KernelType = canonicalKernelType(old.KernelType) != canonicalKernelType(new.KernelType)
	c.Extensions = !(len(old.Extensions) == 0 && len(new.Extensions) == 0) && !slices.Equal(old.Extensions, new.Extensions)
	if old.PackageKey != new.PackageKey && (old.image() || new.image()) {
		// An image records its package stage by key only.
		c.Extensions = true
	}
	return c
}

// classify adds what a MachineConfig item of the manifest stands for.
func classify(p string, it *render.ManifestItem, files, units, refused map[string]bool) {
	if it.Source.Kind != machineconfig.Kind {
		return
	}
	f := it.Source.Field
	switch {
	case strings.HasPrefix(f, fieldFiles) && !it.Generated:
		files[p] = true
	case strings.HasPrefix(f, fieldUnits):
		units[unitName(p)] = true
	case strings.HasPrefix(f, fieldDirs):
		refused["storage.directories "+p] = true
	case strings.HasPrefix(f, fieldLinks):
		refused["storage.links "+p] = true
	}
}

// runtimePathChanges lists the runtime-delivered files (appended
// content, the credentials the daemon writes) that only one side has or
// whose content differs.
func runtimePathChanges(old, new *Side) []string {
	paths := func(s *Side) map[string]string {
		m := map[string]string{}
		for _, r := range s.Runtime {
			if strings.HasPrefix(r.Item, "/") && r.Origin.Kind == machineconfig.Kind {
				m[r.Item] = r.SHA256
			}
		}
		return m
	}
	o, n := paths(old), paths(new)
	var out []string
	for p, d := range o {
		if nd, ok := n[p]; !ok || nd != d {
			out = append(out, p)
		}
	}
	for p := range n {
		if _, ok := o[p]; !ok {
			out = append(out, p)
		}
	}
	return out
}

// baseChanged reports a known base digest change.
func baseChanged(old, new *Side) bool {
	return old.BaseDigest != "" && new.BaseDigest != "" && old.BaseDigest != new.BaseDigest
}

// canonicalKernelType is the MCO's CanonicalizeKernelType
// (pkg/helpers/helpers.go): realtime and 64k-pages, else default.
func canonicalKernelType(k string) string {
	if k == "realtime" || k == "64k-pages" {
		return k
	}
	return "default"
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
