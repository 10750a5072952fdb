package controller

import (
	"strings"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/diff"
)

// archPrediction is one architecture's prediction for one platform.
type archPrediction struct {
	arch, why string
	action    diff.Action
}

// mergePlatform is platform name's entry of a multi-platform change: the
// most disruptive action of the architectures, applying when it applies
// to any compared one (or none was compared), and why (mergeWhy). ok is
// false when no architecture predicts the platform.
func mergePlatform(name string, results []ArchResult) (pa v1alpha1.PlatformAction, ok bool) {
	pa = v1alpha1.PlatformAction{Platform: name, Action: string(diff.None)}
	var preds []archPrediction
	compared := false
	for _, ar := range results {
		ap := archPrediction{arch: ar.Arch, action: diff.Reboot, why: addedWhy}
		if ar.Result != nil {
			p := ar.Result.Platform(name)
			if p == nil {
				continue
			}
			compared = true
			pa.Applies = pa.Applies || p.Applies
			ap.action, ap.why = p.Action, why(*p)
		}
		preds = append(preds, ap)
		pa.Action = string(diff.Max(diff.Action(pa.Action), ap.action))
	}
	if len(preds) == 0 {
		return pa, false
	}
	pa.Applies = pa.Applies || !compared
	pa.Why = mergeWhy(diff.Action(pa.Action), preds)
	return pa, true
}

// mergeWhy says why of the architectures whose action is the most
// disruptive: as it is when every architecture has that action for the
// same reasons, else "ARCH[, ARCH]: WHY" for each distinct reason.
func mergeWhy(top diff.Action, preds []archPrediction) string {
	var whys []string
	arches := map[string][]string{}
	for _, p := range preds {
		if p.action != top {
			continue
		}
		if _, ok := arches[p.why]; !ok {
			whys = append(whys, p.why)
		}
		arches[p.why] = append(arches[p.why], p.arch)
	}
	if len(whys) == 1 && len(arches[whys[0]]) == len(preds) {
		return whys[0]
	}
	parts := make([]string, len(whys))
	for i, w := range whys {
		parts[i] = strings.Join(arches[w], ", ") + ": " + w
	}
	return strings.Join(parts, "; ")
}
