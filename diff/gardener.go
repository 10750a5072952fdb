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
	pr.Rewritten, pr.Restarted = sortedKeys(files), sortedKeys(units)
	for _, f := range pr.Rewritten {
		pr.Rules = append(pr.Rules, Rule{Item: f, Rule: "file rewritten by the node agent"})
	}
	for _, u := range pr.Restarted {
		pr.rule(Restart, u, "unit changed: the node agent restarts it (stops a removed one)")
	}
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
	if len(pr.Restarted) > 0 || len(pr.Rewritten) > 0 {
		pr.Notes = append(pr.Notes, "the node agent also restarts units whose filePaths name a changed file; the image does not record filePaths")
	}
	return pr
}
