package diff

import (
	opv1 "github.com/openshift/api/operator/v1"
)

// predictOpenShift is the machine-config daemon's decision for the same
// rendered-config change under the cluster policies p.
func predictOpenShift(c MCOChange, p opv1.NodeDisruptionPolicyClusterStatus, policyName string) Prediction {
	pr := Prediction{Platform: PlatformOpenShift, Action: None}
	d := PolicyActions(c, p)
	pr.MCOActions = actionNames(d.Actions)
	pr.LegacyActions = LegacyAction(c)
	pr.Rules = d.Rules
	special := hasAction(d.Actions, opv1.SpecialStatusAction)
	pr.Action = Summarize(d.Actions, special)
	pr.Drain = pr.Action == Reboot || pr.Action == Drain
	pr.Notes = append(pr.Notes, "node disruption policy: "+policyName)
	if special {
		pr.Notes = append(pr.Notes, pathRegistriesConf+": the daemon reloads crio and drains unless every change is a digest-only mirror; oslayer does not compare the mirrors and predicts the drain")
	}
	for _, r := range c.Refused {
		pr.Rules = append(pr.Rules, Rule{Item: r, Rule: "the MCO refuses this change (can't reconcile): the update fails"})
		pr.Action = Reboot
	}
	return pr
}

// predictOpenShiftImage is the change applied as a new osImageURL: the
// daemon updates the OS and reboots (osUpdate).
func predictOpenShiftImage(identical bool) Prediction {
	pr := Prediction{Platform: PlatformOpenShiftImage, Action: None}
	if identical {
		return pr
	}
	pr.rule(Reboot, "osImageURL", "a new osImageURL always reboots (osUpdate), after a drain")
	pr.Drain = true
	return pr
}
