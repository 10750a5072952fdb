// Package diff compares two pool images (or two input sets rendered on the
// same base) and predicts what the change does to the nodes of each
// platform: the machine-config daemon's decision on OpenShift (with the
// default or a cluster's NodeDisruptionPolicy), a bootc node's soft reboot
// or reboot, and gardener-node-agent's runtime apply.
//
// It reads no base layer: an image side is its manifest, its config (the
// labels) and its metadata layer (the ownership manifest); an input side
// is a render of the inputs.
package diff

import (
	"fmt"
	"strings"
)

// Action is how disruptive a change is to a node, least first.
type Action string

// The actions, least disruptive first. SoftReboot is only predicted for
// bootc nodes.
const (
	None       Action = "none"
	Reload     Action = "reload"
	Restart    Action = "restart"
	Drain      Action = "drain"
	SoftReboot Action = "soft-reboot"
	Reboot     Action = "reboot"
)

var actionOrder = []Action{None, Reload, Restart, Drain, SoftReboot, Reboot}

// Rank orders actions by disruption: None is 0, Reboot the highest.
func (a Action) Rank() int {
	for i, x := range actionOrder {
		if x == a {
			return i
		}
	}
	return len(actionOrder)
}

// AtLeast reports whether a is at least as disruptive as b.
func (a Action) AtLeast(b Action) bool { return a.Rank() >= b.Rank() }

// Max returns the more disruptive of a and b.
func Max(a, b Action) Action {
	if b.Rank() > a.Rank() {
		return b
	}
	return a
}

// ParseAction parses one of none, reload, restart, drain, soft-reboot,
// reboot.
func ParseAction(s string) (Action, error) {
	for _, a := range actionOrder {
		if string(a) == s {
			return a, nil
		}
	}
	names := make([]string, len(actionOrder))
	for i, a := range actionOrder {
		names[i] = string(a)
	}
	return "", fmt.Errorf("unknown action %q (want one of %s)", s, strings.Join(names, ", "))
}
