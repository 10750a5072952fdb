package diff

import (
	"strings"

	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/sources/gardener"
)

// OperatingSystemConfig fields as the ownership manifest records them.
const (
	fieldOSCFiles = "spec.files["
	fieldOSCUnits = "spec.units["
)

// predictGardener is what gardener-node-agent does for the OSC change:
// it rewrites the changed files and restarts the changed units at
// runtime, never rebooting for OSC content; a base, kernel argument or
// package change needs an OS update (a reboot).
func predictGardener(r *Result) Prediction {
	pr := Prediction{Platform: PlatformGardener, Action: None}
	files, units := map[string]bool{}, map[string]bool{}
	for _, pc := range r.Paths {
		for _, it := range []*render.ManifestItem{pc.Old, pc.New} {
			if it == nil || it.Source.Kind != gardener.Kind {
				continue
			}
			switch f := it.Source.Field; {
			case strings.HasPrefix(f, fieldOSCFiles) && !it.Generated:
				files[pc.Path] = true
			case strings.HasPrefix(f, fieldOSCUnits):
				units[unitName(pc.Path)] = true
			}
		}
	}
	for _, f := range sortedKeys(files) {
		pr.Rules = append(pr.Rules, Rule{Item: f, Rule: "file rewritten by the node agent"})
	}
	for _, u := range sortedKeys(units) {
		pr.rule(Restart, u, "unit changed: the node agent restarts it (stops a removed one)")
	}
	for _, u := range unitsOfFiles(files, r.Old.FilePaths, r.New.FilePaths) {
		if !units[u.unit] {
			units[u.unit] = true
			pr.rule(Restart, u.unit, "filePaths names the changed file "+u.file+": the node agent restarts it")
		}
	}
	pr.Rewritten, pr.Restarted = sortedKeys(files), sortedKeys(units)
	if r.Base.Changed {
		pr.rule(Reboot, "base", "the base changed: an OS update (in-place update or new machines)")
	}
	if r.KernelArgs.Changed {
		pr.rule(Reboot, "kernelArguments", "kernel arguments changed: only an OS update applies them")
	}
	if r.Packages.Changed {
		pr.rule(Reboot, "package stage", "the package stage changed: an OS update")
	}
	pr.Drain = pr.Action == Reboot
	if len(pr.Rewritten) > 0 && (r.Old.image() || r.New.image()) {
		pr.Notes = append(pr.Notes, "the node agent also restarts units whose filePaths name a changed file; the image does not record filePaths")
	}
	return pr
}

// unitFile is a unit restarted for a changed file it names.
type unitFile struct{ unit, file string }

// unitsOfFiles lists the units whose filePaths (on either side) name a
// changed file, by unit name.
func unitsOfFiles(files map[string]bool, sides ...map[string][]string) []unitFile {
	seen := map[string]bool{}
	var out []unitFile
	for _, fp := range sides {
		for _, u := range sortedKeys(keysOf(fp)) {
			for _, f := range fp[u] {
				if files[f] && !seen[u] {
					seen[u] = true
					out = append(out, unitFile{u, f})
				}
			}
		}
	}
	return out
}

func keysOf(m map[string][]string) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}
