package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Condition types and reasons of publishing: which built image the
// consumers (spec.publish) get.
const (
	// ConditionPinned is true while spec.pin holds the published image at
	// a digest of the build history; newer builds are built and recorded,
	// not published.
	ConditionPinned = "Pinned"
	// ConditionPoolPaused is true while the controller holds the
	// OpenShift pool paused for a build (a Job, or in its process) whose
	// change reboots the nodes anyway, so that the pool rolls once for
	// the change and its image; false, with the reason, once it lifted
	// the pause, when the change is applied in place (LiveChange: not
	// held), or when it could not pause the pool or found it paused by
	// someone else.
	ConditionPoolPaused = "PoolPaused"
	// ReasonPinInvalid is Degraded's reason when spec.pin names no good
	// image of the build history.
	ReasonPinInvalid = "PinInvalid"
)

// PublishedImage is the image spec.publish hands to the consumers (the
// osImageURL MachineConfig, the ConfigMap). It is status.image unless
// spec.pin holds an older image, or the change since the published image
// is one the machine-config daemon applies in place (OpenShift,
// spec.publish.machineConfig) or alters no node content.
type PublishedImage struct {
	// Image is the digested reference published.
	// +optional
	Image string `json:"image,omitempty"`
	// InputsDigest and BaseDigest are the published image's.
	// +optional
	InputsDigest string `json:"inputsDigest,omitempty"`
	// +optional
	BaseDigest string `json:"baseDigest,omitempty"`
	// Decision says why this image is published: Built (the newest
	// build), Pinned (spec.pin), LiveApplied (the newer build's change is
	// applied in place: held back) or NoNodeChange (the newer build
	// changes nothing a node has: held back).
	// +optional
	Decision string `json:"decision,omitempty"`
	// Message explains the decision: the predicted action and the rules,
	// paths or fields that decided it.
	// +optional
	Message string `json:"message,omitempty"`
	// Time is when this image was published.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// Decisions of status.published.decision.
const (
	DecisionBuilt        = "Built"
	DecisionPinned       = "Pinned"
	DecisionLiveApplied  = "LiveApplied"
	DecisionNoNodeChange = "NoNodeChange"
)

// ImageChange is what a change between two images does to the nodes, as
// oslayer diff predicts it: from the published image (else the previous
// good image) to the newest build.
type ImageChange struct {
	// From and To are the digested references compared.
	From string `json:"from"`
	To   string `json:"to"`
	// Action is the action on the platforms spec.publish hands the image
	// to (ActionPlatform): the machine-config daemon's for
	// spec.publish.machineConfig, bootc's for spec.publish.bootcNodePool,
	// the node agent's for a Gardener source; otherwise the most
	// disruptive action of the platforms the pool's inputs are for. One
	// of none, reload, restart, drain, soft-reboot, reboot.
	// +optional
	Action string `json:"action,omitempty"`
	// ActionPlatform names the platforms Action is for (empty: the most
	// disruptive of every platform the inputs are for).
	// +optional
	ActionPlatform string `json:"actionPlatform,omitempty"`
	// Platforms are the predicted actions per platform.
	// +optional
	Platforms []PlatformAction `json:"platforms,omitempty"`
	// DownloadBytes is what a node on From downloads to get To (the
	// compressed layers it lacks); DownloadLayers counts them. For a
	// multi-platform image they are the sums over Architectures (one node
	// of each architecture).
	// +optional
	DownloadBytes int64 `json:"downloadBytes,omitempty"`
	// +optional
	DownloadLayers int32 `json:"downloadLayers,omitempty"`
	// Paths are the first changed node paths (at most 20) with the
	// document and field that put them there; PathsTotal counts them all.
	// +optional
	Paths []ChangedPath `json:"paths,omitempty"`
	// +optional
	PathsTotal int32 `json:"pathsTotal,omitempty"`
	// KernelArgs, Base and Packages report a change of the kernel
	// arguments, the base image and the package stage.
	// +optional
	KernelArgs bool `json:"kernelArgs,omitempty"`
	// +optional
	Base bool `json:"base,omitempty"`
	// +optional
	Packages bool `json:"packages,omitempty"`
	// Error is why the change could not be analysed (the images could not
	// be read); the newest build is then published at once.
	// +optional
	Error string `json:"error,omitempty"`
	// Architectures are, for a multi-platform image (an index), the
	// architectures of To, each compared with the same platform of From;
	// the fields above merge them (the most disruptive action per
	// platform, the union of the paths and of the changes). Empty for one
	// image.
	// +optional
	// +listType=atomic
	Architectures []ArchChange `json:"architectures,omitempty"`
}

// ArchChange is one architecture's part of a multi-platform change.
type ArchChange struct {
	// Architecture is the platform's architecture ("arm64"; with its
	// variant, "arm/v7").
	Architecture string `json:"architecture"`
	// Action is the most disruptive action, for nodes of this
	// architecture, of the platforms that apply (empty when the change
	// could not be analysed).
	// +optional
	Action string `json:"action,omitempty"`
	// Added is set when From has no image of this architecture: its nodes
	// have no published image to stay on, and every platform's action is
	// reboot.
	// +optional
	Added bool `json:"added,omitempty"`
	// DownloadBytes and DownloadLayers are what a node of this
	// architecture on From downloads to get To (the whole image when
	// Added).
	// +optional
	DownloadBytes int64 `json:"downloadBytes,omitempty"`
	// +optional
	DownloadLayers int32 `json:"downloadLayers,omitempty"`
}

// PlatformAction is one platform's predicted action.
type PlatformAction struct {
	// Platform is openshift (the machine-config daemon applying the
	// rendered-config change in place), openshift-image (the change as a
	// new osImageURL), bootc or gardener.
	Platform string `json:"platform"`
	// Action is none, reload, restart, drain, soft-reboot or reboot.
	Action string `json:"action"`
	// Applies is false when the pool's inputs are not of this platform.
	// +optional
	Applies bool `json:"applies,omitempty"`
	// Why names the first rules that decided (paths, units, fields).
	// +optional
	Why string `json:"why,omitempty"`
}

// ChangedPath is one node path of a change.
type ChangedPath struct {
	Path string `json:"path"`
	// Change is added, changed or removed.
	Change string `json:"change"`
	// Source is the document and field that put the path there (in the
	// newer image; in the older for a removed path).
	// +optional
	Source string `json:"source,omitempty"`
}
