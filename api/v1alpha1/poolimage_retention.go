package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ConditionRetention reports the last retention run of spec.retention:
// true (reason Pruned, DryRun) after a run, false (reason DeleteRefused,
// RetentionFailed) when it could not delete; a build is never failed by
// it.
const ConditionRetention = "Retention"

// Retention prunes the target repository after every good build: the
// decision of oslayer prune (docs/prune.md) with references read from the
// cluster. Off unless enabled is true.
type Retention struct {
	// Enabled turns retention on (default off: nothing is deleted
	// without asking).
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Keep is how many of the pool's newest good images stay besides
	// those in use (default 5).
	// +optional
	// +kubebuilder:validation:Minimum=1
	Keep *int32 `json:"keep,omitempty"`
	// Grace keeps every dated image younger than it (default 1h; 0s
	// turns it off).
	// +optional
	Grace *metav1.Duration `json:"grace,omitempty"`
	// DryRun decides and reports (status.retention, an Event) without
	// deleting.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}

// Retention's defaults.
const (
	DefaultRetentionKeep  = 5
	DefaultRetentionGrace = "1h"
)

// RetentionStatus is the last retention run.
type RetentionStatus struct {
	// Time is when it ran.
	Time metav1.Time `json:"time"`
	// Image is the status.image of the good build it ran after.
	// +optional
	Image string `json:"image,omitempty"`
	// DryRun says it deleted nothing by spec.retention.dryRun.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// Kept counts the images kept (in use, newest, not oslayer's).
	Kept int32 `json:"kept"`
	// Deleted counts the images deleted with their signature,
	// attestation and SBOM tags.
	Deleted int32 `json:"deleted"`
	// WouldDelete counts the images a dry run would delete (or a refused
	// run did not).
	// +optional
	WouldDelete int32 `json:"wouldDelete,omitempty"`
}
