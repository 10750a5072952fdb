package v1alpha1

// The hand-off to bootc-operator (node.bootc.dev/v1alpha1): with
// spec.publish.bootcNodePool the controller keeps the named
// BootcNodePool's spec.image.ref at status.image (REPO@sha256:..., never a
// tag) and mirrors the pool's rollout into status.bootcNodePool.

// ConditionBootcNodePool is true while the BootcNodePool of
// spec.publish.bootcNodePool names status.image; false (reason
// BootcNodePoolNotFound, BootcNodePoolFailed) when it could not be set.
const ConditionBootcNodePool = "BootcNodePool"

// BootcNodePoolStatus mirrors the BootcNodePool's status (field names as
// bootc-operator's API has them).
type BootcNodePoolStatus struct {
	// Name is the BootcNodePool (cluster-scoped).
	Name string `json:"name"`
	// Ref is the pool's spec.image.ref as last written or read.
	// +optional
	Ref string `json:"ref,omitempty"`
	// TargetDigest is the pool's status.targetDigest.
	// +optional
	TargetDigest string `json:"targetDigest,omitempty"`
	// DeployedDigest is the pool's status.deployedDigest: the digest
	// every node of the pool has booted.
	// +optional
	DeployedDigest string `json:"deployedDigest,omitempty"`
	// UpdateAvailable is the pool's status.updateAvailable.
	// +optional
	UpdateAvailable bool `json:"updateAvailable,omitempty"`
	// UpToDate is the status (True, False, Unknown) of the pool's
	// UpToDate condition ("" when it has none), UpToDateReason its reason.
	// +optional
	UpToDate string `json:"upToDate,omitempty"`
	// +optional
	UpToDateReason string `json:"upToDateReason,omitempty"`
	// Deployed is true when DeployedDigest is status.image's digest or,
	// for a multi-platform status.image (an OCI index), the digest of one
	// of its platform images (a node boots its platform's image).
	// +optional
	Deployed bool `json:"deployed,omitempty"`
	// NodeCount, UpdatedCount, UpdatingCount and DegradedCount are the
	// pool's status counts of those names.
	// +optional
	NodeCount int32 `json:"nodeCount,omitempty"`
	// +optional
	UpdatedCount int32 `json:"updatedCount,omitempty"`
	// +optional
	UpdatingCount int32 `json:"updatingCount,omitempty"`
	// +optional
	DegradedCount int32 `json:"degradedCount,omitempty"`
	// Degraded is the status of the pool's Degraded condition ("" when
	// it has none), DegradedReason its reason (RolloutHalted,
	// NodeDegraded, Healthy, ...) and DegradedMessage its message.
	// +optional
	Degraded string `json:"degraded,omitempty"`
	// +optional
	DegradedReason string `json:"degradedReason,omitempty"`
	// +optional
	DegradedMessage string `json:"degradedMessage,omitempty"`
	// RebootPolicy is the pool's spec.disruption.rebootPolicy as the
	// controller set it: AllowSoftReboot only when oslayer diff predicts
	// the change to the published image soft-reboot eligible on bootc,
	// else RebootOnly.
	// +optional
	RebootPolicy string `json:"rebootPolicy,omitempty"`
	// SoftRebootPredicted is that prediction, SoftRebootWhy its rules.
	// +optional
	SoftRebootPredicted bool `json:"softRebootPredicted,omitempty"`
	// +optional
	SoftRebootWhy string `json:"softRebootWhy,omitempty"`
	// StagedNodes counts the pool's BootcNodes that staged the published
	// image, SoftRebootCapable those of them whose staged entry bootc
	// reports softRebootCapable; SoftRebootMismatch names the nodes whose
	// report differs from the prediction.
	// +optional
	StagedNodes int32 `json:"stagedNodes,omitempty"`
	// +optional
	SoftRebootCapable int32 `json:"softRebootCapable,omitempty"`
	// +optional
	SoftRebootMismatch string `json:"softRebootMismatch,omitempty"`
}
