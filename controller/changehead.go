package controller

import (
	"strings"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/diff"
)

// headline sets status.change.action to the action on the platforms the
// PoolImage publishes to, and status.change.actionPlatform to their
// names: the machine-config daemon's (openshift) for
// spec.publish.machineConfig, bootc's for spec.publish.bootcNodePool, the
// node agent's (gardener) for a Gardener source. Without one of those
// (a ConfigMap, no spec.publish) the action stays the most disruptive of
// the platforms the inputs are for, and actionPlatform is empty. The
// per-platform table (status.change.platforms) is unchanged.
func headline(pi *v1alpha1.PoolImage, ch *v1alpha1.ImageChange) {
	if ch == nil || ch.Error != "" {
		return
	}
	names := publishedPlatforms(pi)
	action, found := diff.None, []string(nil)
	for _, name := range names {
		pa := platformAction(ch, name)
		if pa == nil {
			continue
		}
		a, err := diff.ParseAction(pa.Action)
		if err != nil {
			return // an action the status cannot order: keep the overall one
		}
		action, found = diff.Max(action, a), append(found, name)
	}
	if len(found) == 0 {
		return
	}
	ch.Action, ch.ActionPlatform = string(action), strings.Join(found, ", ")
}

// publishedPlatforms are the platforms whose nodes apply what the
// PoolImage publishes, in diff's order.
func publishedPlatforms(pi *v1alpha1.PoolImage) []string {
	var out []string
	p := pi.Spec.Publish
	if p != nil && p.MachineConfig != nil && pi.Spec.Source.OpenShift != nil {
		out = append(out, diff.PlatformOpenShift)
	}
	if p != nil && p.BootcNodePool != "" {
		out = append(out, diff.PlatformBootc)
	}
	if pi.Spec.Source.Gardener != nil {
		out = append(out, diff.PlatformGardener)
	}
	return out
}
