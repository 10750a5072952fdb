package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Rolling a halted rollout back (spec.rollback): when bootc-operator
// halts the rollout of the published image (the BootcNodePool's Degraded
// condition with reason RolloutHalted), the controller publishes the
// previous good image again — the image the pool's nodes last all ran
// (status.deployedDigest), which their rollback deployment holds — and
// says so in status.rollback, the condition RolledBack and an Event. It
// holds until a newer build replaces the halted image, or spec.pin is
// set.

// RollbackPolicy is spec.rollback.
type RollbackPolicy struct {
	// Enabled turns the rollback on (default off: a halted rollout stays
	// halted for a person to decide).
	// +optional
	Enabled bool `json:"enabled,omitempty"`
}

// RollbackStatus is a rollback made by spec.rollback.
type RollbackStatus struct {
	// From is the image whose rollout halted.
	From string `json:"from"`
	// Image is the image published again (a Succeeded build of
	// status.builds).
	Image string `json:"image"`
	// Reason is the BootcNodePool's Degraded reason that triggered it
	// (RolloutHalted), Message its message.
	Reason string `json:"reason"`
	// +optional
	Message string `json:"message,omitempty"`
	// Time is when the rollback was made.
	Time metav1.Time `json:"time"`
}

// ConditionRolledBack is true while spec.rollback holds the published
// image at the previous good image after a halted rollout; false with the
// reason when the rollout halted and no image could be rolled back to.
const ConditionRolledBack = "RolledBack"

// ConditionRollout mirrors the BootcNodePool's Degraded condition
// (status, reason RolloutHalted, NodeDegraded, Healthy, ..., message).
const ConditionRollout = "RolloutDegraded"

// DecisionRolledBack is status.published.decision for an image published
// again by spec.rollback.
const DecisionRolledBack = "RolledBack"
