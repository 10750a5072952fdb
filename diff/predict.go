package diff

// The platforms a prediction is for.
const (
	PlatformOpenShift      = "openshift"       // the daemon applies the rendered-config change in place
	PlatformOpenShiftImage = "openshift-image" // the change arrives as a new osImageURL
	PlatformBootc          = "bootc"
	PlatformGardener       = "gardener"
)

// Prediction is what one platform does to a node for the change.
type Prediction struct {
	Platform string `json:"platform"`
	// Applies is false when the inputs are not of this platform
	// (MachineConfigs for OpenShift, OperatingSystemConfigs for Gardener).
	Applies bool   `json:"applies"`
	Action  Action `json:"action"`
	// Rules are the paths, units and fields that decided, with the rule.
	Rules []Rule   `json:"rules,omitempty"`
	Notes []string `json:"notes,omitempty"`
	// MCOActions are the daemon's NodeDisruptionPolicy actions
	// ("Reload crio.service"); LegacyActions its first-boot actions
	// (OpenShift only).
	MCOActions    []string `json:"mcoActions,omitempty"`
	LegacyActions []string `json:"legacyActions,omitempty"`
	// LegacyDrain is the daemon's drain for its first-boot actions.
	LegacyDrain bool `json:"legacyDrain,omitempty"`
	// Drain says whether the node is drained first.
	Drain bool `json:"drain"`
	// Refused is set when the MCO refuses the change (OpenShift only):
	// Action is then reboot, with a drain, as for a new node.
	Refused bool `json:"refused,omitempty"`
	// Rewritten and Restarted are the files gardener-node-agent writes
	// and the units it restarts (Gardener only).
	Rewritten []string `json:"rewritten,omitempty"`
	Restarted []string `json:"restarted,omitempty"`
}

// rule adds a rule and raises the action to at least a.
func (p *Prediction) rule(a Action, item, why string) {
	p.Rules = append(p.Rules, Rule{Item: item, Rule: why})
	p.Action = Max(p.Action, a)
}
