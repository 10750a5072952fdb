package settings

// Settings are a pool's build settings as every front-end writes them
// (JSON names; embedded inline). A nil pointer or an empty value is unset:
// the specification's default, or what an outer level sets (Inherit,
// Refine).
type Settings struct {
	// BaseIndex is how the base is read: auto (default: its index, read
	// once per base digest and cached) or off (never read; the build
	// assumes what its report says).
	// +optional
	// +kubebuilder:validation:Enum=auto;off
	BaseIndex string `json:"baseIndex,omitempty"`
	// Preflight are the options of the preflight checks.
	// +optional
	Preflight *Preflight `json:"preflight,omitempty"`
	// BakeSecrets bakes Gardener secretRef content and the credentials a
	// MachineConfig holds that the platform delivers itself (the pull
	// secret /var/lib/kubelet/config.json, the kubelet's bootstrap
	// kubeconfig) into the image (off by default: they are reported as
	// runtime-delivered; an image is readable by everyone who can pull it).
	// +optional
	BakeSecrets *bool `json:"bakeSecrets,omitempty"`
	// Strict refuses OperatingSystemConfig fields the OSC API does not
	// have (default: ignored with a warning, as gardener-node-agent does).
	// +optional
	Strict *bool `json:"strict,omitempty"`
	// AllowTopLevel are extra top-level directories the content may go
	// to (it survives only on composefs bases).
	// +optional
	AllowTopLevel []string `json:"allowTopLevel,omitempty"`
	// RequestJobs bounds an image's registry requests about blobs at
	// once (mounts, checks, uploads; default 32): across a wide-area
	// network each costs a round trip, so a base of hundreds of layers
	// goes to a new repository, or is read for its index, in a few.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	RequestJobs int32 `json:"requestJobs,omitempty"`
}

// Preflight are the options of the preflight checks.
type Preflight struct {
	// Skip names checks not to run.
	// +optional
	Skip []string `json:"skip,omitempty"`
	// ExpectVersion is the OS version the image must have.
	// +optional
	ExpectVersion string `json:"expectVersion,omitempty"`
	// FatalWarnings fails the build on warnings.
	// +optional
	FatalWarnings *bool `json:"fatalWarnings,omitempty"`
	// DenyUsrOverride fails the build when a file replaces one under /usr.
	// +optional
	DenyUsrOverride *bool `json:"denyUsrOverride,omitempty"`
	// MaxAddedBytes bounds the compressed bytes added on top of the base
	// (e.g. 512Mi; default 2GiB).
	// +optional
	MaxAddedBytes string `json:"maxAddedBytes,omitempty"`
	// RequireBase is an official base image whose layers (digest and
	// diff_id) must be an ordered prefix of the image's.
	// +optional
	RequireBase string `json:"requireBase,omitempty"`
	// WarnLayers warns when the image has more layers than this (default
	// 127: docker pull fails at 128).
	// +optional
	// +kubebuilder:validation:Minimum=1
	WarnLayers int32 `json:"warnLayers,omitempty"`
	// MaxLayers fails the build when the image has this many layers or
	// more (default 500).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxLayers int32 `json:"maxLayers,omitempty"`
	// AllowSecrets are paths (or path.Match patterns) that may hold a
	// secret: as on the node (e.g. /var/lib/kubelet/config.json, where an
	// OpenShift pool's rendered MachineConfig puts the cluster's pull
	// secret) or as in the image (oslayer keeps such a file under
	// /usr/lib/oslayer/var, as /usr/lib/oslayer/var/var/lib/kubelet/config.json).
	// Such a MachineConfig credential is runtime-delivered unless named
	// here: naming it bakes it.
	// +optional
	AllowSecrets []string `json:"allowSecrets,omitempty"`
}

// True is v set and true.
func True(v *bool) bool { return v != nil && *v }

// Bool is a pointer to v (for setting a field).
func Bool(v bool) *bool { return &v }
