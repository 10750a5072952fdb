package diff

import (
	"errors"

	opv1 "github.com/openshift/api/operator/v1"
)

// predictOpenShift is the machine-config daemon's decision for the same
// rendered-config change under the cluster policies p.
func predictOpenShift(r *Result, p opv1.NodeDisruptionPolicyClusterStatus, policyName string) Prediction {
	c := r.MCO
	pr := Prediction{Platform: PlatformOpenShift, Action: None}
	d := PolicyActions(c, p)
	pr.MCOActions = actionNames(d.Actions)
	pr.LegacyActions = LegacyAction(c)
	pr.LegacyDrain = LegacyDrain(pr.LegacyActions, r)
	pr.Rules = d.Rules
	drainSpecial := false
	if hasAction(d.Actions, opv1.SpecialStatusAction) {
		var note string
		drainSpecial, note = registriesDrain(r)
		pr.Notes = append(pr.Notes, note)
	}
	pr.Action = Summarize(d.Actions, drainSpecial)
	pr.Drain = pr.Action == Reboot || pr.Action == Drain
	pr.Notes = append(pr.Notes, "node disruption policy: "+policyName)
	if len(c.Refused) > 0 {
		refused(&pr, c.Refused)
	}
	return pr
}

// refused reports a change the MCO refuses (reconcilable, run by the
// render controller before any node is touched: the pool degrades). No
// node can get it in place; it takes a new node, so the answer is a
// reboot with a drain, and the daemon's actions and first-boot actions
// say the same.
func refused(pr *Prediction, items []string) {
	for _, r := range items {
		pr.Rules = append(pr.Rules, Rule{Item: r, Rule: "the MCO refuses this change (can't reconcile): the update fails"})
	}
	pr.Refused = true
	pr.Action, pr.Drain = Reboot, true
	pr.MCOActions = []string{string(opv1.RebootStatusAction)}
	pr.LegacyActions, pr.LegacyDrain = []string{LegacyReboot}, true
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

// registriesConf reads a side's registries.conf; none is empty, as the
// daemon reads a config without the file.
func registriesConf(s *Side) ([]byte, error) {
	data, err := s.ReadFile(pathRegistriesConf)
	if errors.Is(err, errNoFile) {
		return nil, nil
	}
	return data, err
}

// registriesDrain decides the Special action's drain
// (isDrainRequiredForNodeDisruptionActions): none when the registries.conf
// change is safe. A side without the file, or one that does not parse,
// drains.
func registriesDrain(r *Result) (bool, string) {
	o, err := registriesConf(r.Old)
	if err != nil {
		return true, pathRegistriesConf + ": drain (" + err.Error() + ")"
	}
	n, err := registriesConf(r.New)
	if err != nil {
		return true, pathRegistriesConf + ": drain (" + err.Error() + ")"
	}
	safe, err := SafeRegistriesChange(o, n)
	switch {
	case err != nil:
		return true, pathRegistriesConf + ": drain (" + err.Error() + ")"
	case safe:
		return false, pathRegistriesConf + ": crio reloads without a drain (no registry or mirror removed, additions pull by digest only)"
	}
	return true, pathRegistriesConf + ": drain (a registry, mirror or search entry is removed or changed, or an addition does not pull by digest only)"
}
