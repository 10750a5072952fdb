package diff

import (
	"fmt"

	opv1 "github.com/openshift/api/operator/v1"
)

// Rule says which rule decided (part of) an action: the path or unit it
// applies to and what it matched.
type Rule struct {
	// Item is the changed node path, unit name, "sshKeys" or a field such
	// as "osImageURL".
	Item string `json:"item"`
	// Rule is what decided: "policy /etc/containers/policy.json",
	// "no policy: reboot", "always reboots".
	Rule string `json:"rule"`
	// Actions are the policy's actions for the item ("Reload crio.service").
	Actions []string `json:"actions,omitempty"`
}

// PolicyDecision is the daemon's node-disruption-policy decision with the
// rules that made it.
type PolicyDecision struct {
	Actions []opv1.NodeDisruptionPolicyStatusAction `json:"-"`
	Rules   []Rule                                  `json:"rules"`
}

// PolicyActions is calculatePostConfigChangeNodeDisruptionAction
// (without the force file and the API wait): osImageURL, kernel
// arguments, FIPS, kernel type and extensions reboot; no file, unit or
// passwd change is None; otherwise each changed file takes its closest
// file policy, each unit its unit policy, an SSH key change the SSH
// policy, and an item without a policy reboots.
func PolicyActions(c MCOChange, p opv1.NodeDisruptionPolicyClusterStatus) PolicyDecision {
	if f := c.rebootFields(); len(f) > 0 {
		d := PolicyDecision{Actions: only(opv1.RebootStatusAction)}
		for _, name := range f {
			d.Rules = append(d.Rules, Rule{Item: name, Rule: "always reboots"})
		}
		return d
	}
	if len(c.Files) == 0 && len(c.Units) == 0 && !c.Passwd {
		return PolicyDecision{Actions: only(opv1.NoneStatusAction)}
	}
	return fromDiffs(c.Passwd, c.Files, c.Units, p)
}

// fromDiffs is calculatePostConfigChangeNodeDisruptionActionFromMCDiffs.
func fromDiffs(ssh bool, files, units []string, p opv1.NodeDisruptionPolicyClusterStatus) PolicyDecision {
	var d PolicyDecision
	for _, f := range files {
		ok, match, acts := ClosestFilePolicy(f, p.Files)
		if !ok {
			return rebootFor(d, Rule{Item: f, Rule: "no file policy: reboot"})
		}
		d.Actions = append(d.Actions, acts...)
		d.Rules = append(d.Rules, Rule{Item: f, Rule: "file policy " + match, Actions: actionNames(acts)})
	}
	for _, u := range units {
		i := indexUnit(p.Units, u)
		if i < 0 {
			return rebootFor(d, Rule{Item: u, Rule: "no unit policy: reboot"})
		}
		d.Actions = append(d.Actions, p.Units[i].Actions...)
		d.Rules = append(d.Rules, Rule{Item: u, Rule: "unit policy " + u, Actions: actionNames(p.Units[i].Actions)})
	}
	if ssh {
		d.Actions = append(d.Actions, p.SSHKey.Actions...)
		d.Rules = append(d.Rules, Rule{Item: "sshKeys", Rule: "SSH key policy", Actions: actionNames(p.SSHKey.Actions)})
	}
	switch {
	case hasAction(d.Actions, opv1.RebootStatusAction):
		d.Actions = only(opv1.RebootStatusAction)
	case hasAction(d.Actions, opv1.NoneStatusAction):
		if hasAction(d.Actions, opv1.DrainStatusAction, opv1.ReloadStatusAction, opv1.RestartStatusAction, opv1.DaemonReloadStatusAction, opv1.SpecialStatusAction) {
			d.Actions = withoutNone(d.Actions)
		} else {
			d.Actions = only(opv1.NoneStatusAction)
		}
	}
	return d
}

// rebootFor ends a decision at an item without a policy: the daemon
// returns Reboot at once.
func rebootFor(d PolicyDecision, r Rule) PolicyDecision {
	d.Rules = append(d.Rules, r)
	d.Actions = only(opv1.RebootStatusAction)
	return d
}

func hasAction(as []opv1.NodeDisruptionPolicyStatusAction, ts ...opv1.NodeDisruptionPolicyStatusActionType) bool {
	for _, a := range as {
		for _, t := range ts {
			if a.Type == t {
				return true
			}
		}
	}
	return false
}

func withoutNone(as []opv1.NodeDisruptionPolicyStatusAction) []opv1.NodeDisruptionPolicyStatusAction {
	out := []opv1.NodeDisruptionPolicyStatusAction{}
	for _, a := range as {
		if a.Type != opv1.NoneStatusAction {
			out = append(out, a)
		}
	}
	return out
}

// actionNames renders actions as "Reload crio.service", "Reboot".
func actionNames(as []opv1.NodeDisruptionPolicyStatusAction) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		switch {
		case a.Reload != nil:
			out = append(out, fmt.Sprintf("%s %s", a.Type, a.Reload.ServiceName))
		case a.Restart != nil:
			out = append(out, fmt.Sprintf("%s %s", a.Type, a.Restart.ServiceName))
		default:
			out = append(out, string(a.Type))
		}
	}
	return out
}

// Summarize maps the daemon's actions to one Action: Reboot → reboot;
// Drain, or Special (registries.conf) when drainSpecial → drain; Restart
// → restart; Reload, DaemonReload or Special → reload; None → none
// (isDrainRequiredForNodeDisruptionActions decides the drain).
func Summarize(as []opv1.NodeDisruptionPolicyStatusAction, drainSpecial bool) Action {
	switch {
	case hasAction(as, opv1.RebootStatusAction):
		return Reboot
	case hasAction(as, opv1.DrainStatusAction), hasAction(as, opv1.SpecialStatusAction) && drainSpecial:
		return Drain
	case hasAction(as, opv1.RestartStatusAction):
		return Restart
	case hasAction(as, opv1.ReloadStatusAction, opv1.DaemonReloadStatusAction, opv1.SpecialStatusAction):
		return Reload
	}
	return None
}
