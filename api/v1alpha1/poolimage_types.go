package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/oslayer/oslayer/pipeline/settings"
)

func metav1AddToGroupVersion(s *runtime.Scheme) { metav1.AddToGroupVersion(s, GroupVersion) }

// Condition types of a PoolImage.
const (
	// ConditionReady is true while status.image is the image of the
	// current inputs (built, pushed, signed when signing is asked for).
	ConditionReady = "Ready"
	// ConditionBuilding is true while a build runs.
	ConditionBuilding = "Building"
	// ConditionDegraded is true when the last build failed; its message
	// names the step, the document and the field. status.image stays the
	// last good image.
	ConditionDegraded = "Degraded"
)

// PoolImage asks the controller for one pool's image: it reads the pool's
// configuration from the source, builds it onto the base, runs preflight,
// pushes it to the target, signs it and records the digest in status.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pi
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.status.image`
// +kubebuilder:printcolumn:name="Published",type=string,JSONPath=`.status.published.decision`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PoolImage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PoolImageSpec   `json:"spec"`
	Status PoolImageStatus `json:"status,omitempty"`
}

// PoolImageList is a list of PoolImages.
//
// +kubebuilder:object:root=true
type PoolImageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PoolImage `json:"items"`
}

// PoolImageSpec is what to build.
//
// +kubebuilder:validation:XValidation:rule="!has(self.publish) || !has(self.publish.machineConfig) || has(self.source.openshift)",message="publish.machineConfig needs source.openshift"
// +kubebuilder:validation:XValidation:rule="!has(self.packages) || (has(self.builder) && self.builder == 'Job')",message="spec.packages needs spec.builder: Job (the package stage runs buildah in the build pod)"
type PoolImageSpec struct {
	// Source is where the pool's configuration comes from.
	Source Source `json:"source"`
	// Pool is the pool the image is for (the OSC's pool, the MachineConfig
	// role); default: the OpenShift source's MachineConfigPool, else the
	// PoolImage's name.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	Pool string `json:"pool,omitempty"`
	// Base is the ostree-native base image; a digest (REPO@sha256:...) is
	// recommended, a tag is resolved at every reconcile.
	// +kubebuilder:validation:MinLength=1
	Base string `json:"base"`
	// Target is the repository and tag the image is pushed to (REPO:TAG);
	// the tag moves only after every stage (preflight, signing) succeeded.
	// +kubebuilder:validation:MinLength=1
	Target string `json:"target"`
	// Arch are the architectures to build for (default [amd64]): one
	// selects the base's platform; several ([amd64, arm64]) or [all]
	// (every platform of the base's index) build one image per platform
	// and publish one OCI index of them, signed as a whole and per
	// platform, as oslayer build --arch amd64,arm64 does (same digest).
	// status.image is then the index.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:Enum=amd64;arm64;ppc64le;s390x;all
	// +kubebuilder:validation:XValidation:rule="!self.exists(a, a == 'all') || size(self) == 1",message="all stands alone"
	Arch []string `json:"arch,omitempty"`
	// Settings are the build settings every front-end writes the same
	// way: baseIndex, preflight, bakeSecrets, strict, allowTopLevel.
	settings.Settings `json:",inline"`
	// PullSecrets are kubernetes.io/dockerconfigjson Secrets in the
	// PoolImage's namespace used to pull the base.
	// +optional
	PullSecrets []LocalObjectReference `json:"pullSecrets,omitempty"`
	// PushSecret is a kubernetes.io/dockerconfigjson Secret in the
	// PoolImage's namespace used to push to the target.
	// +optional
	PushSecret *LocalObjectReference `json:"pushSecret,omitempty"`
	// Signing names the cosign key that signs the image; without it the
	// image is pushed unsigned (status.signed false).
	// +optional
	Signing *Signing `json:"signing,omitempty"`
	// Publish hands status.image to its consumers beyond the status.
	// +optional
	Publish *Publish `json:"publish,omitempty"`
	// Builder says where the build runs: InProcess (default) in the
	// controller process, or Job: a Kubernetes Job (the build pod) running
	// oslayer build --from-poolimage with the project's image. Package
	// inputs (spec.packages, MachineConfig extensions and kernelType) need
	// Job: their stage runs buildah.
	// +optional
	// +kubebuilder:default=InProcess
	// +kubebuilder:validation:Enum=InProcess;Job
	Builder string `json:"builder,omitempty"`
	// Pin holds the published image at this digest (sha256:...) of a good
	// build in status.builds, until it is removed; newer builds are still
	// built and recorded (status.published, condition Pinned).
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	Pin string `json:"pin,omitempty"`
	// Job configures the build pod of spec.builder Job.
	// +optional
	Job *JobOptions `json:"job,omitempty"`
	// Packages are the package stage's inputs: a user Containerfile, build
	// arguments, repository definitions and build secrets. They need
	// spec.builder Job.
	// +optional
	Packages *Packages `json:"packages,omitempty"`
	// Retention prunes the target repository after good builds
	// (poolimage_retention.go).
	// +optional
	Retention *Retention `json:"retention,omitempty"`
	// Rollback rolls a halted rollout back (poolimage_rollback.go).
	// +optional
	Rollback *RollbackPolicy `json:"rollback,omitempty"`
}

// Builders of spec.builder.
const (
	BuilderInProcess = "InProcess"
	BuilderJob       = "Job"
)

// JobOptions configure the build pod.
type JobOptions struct {
	// ServiceAccountName is the build pod's ServiceAccount in the
	// PoolImage's namespace (default oslayer-build); bind it to the
	// ClusterRole oslayer-build (config/rbac/build_role.yaml), and for the
	// OpenShift source to oslayer-build-openshift with a
	// ClusterRoleBinding.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// TTLSecondsAfterFinished is how long a finished build Job (and its
	// result ConfigMap) is kept (default 3600). A Job that failed for a
	// reason other than its input does not wait for it: it is deleted and
	// made again after a backoff of 250 ms doubling up to 30 s
	// (status.builds[].attempt counts the attempts).
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// Resources of the build container (default: requests 500m CPU and
	// 1Gi memory, no limits).
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// Packages are the package stage's inputs. The stage runs before the
// config layers: the Containerfile generated from the MachineConfigs'
// extensions and kernelType, followed by the user's (FROM packages).
type Packages struct {
	// Containerfile is the user's Containerfile: a ConfigMap key in the
	// PoolImage's namespace. Its final stage builds FROM packages.
	// +optional
	Containerfile *ConfigMapKeyReference `json:"containerfile,omitempty"`
	// BuildArgs are the Containerfile's build arguments.
	// +optional
	BuildArgs map[string]string `json:"buildArgs,omitempty"`
	// Repos is a ConfigMap whose keys are repository definitions (NAME.repo)
	// for the install steps; they are in no layer.
	// +optional
	Repos *LocalObjectReference `json:"repos,omitempty"`
	// BuildSecrets are mounted for RUN --mount=type=secret,id=ID steps
	// (entitlement certificates, repository credentials); they are in no
	// layer, label or history and not part of the package key.
	// +optional
	// +listType=map
	// +listMapKey=id
	BuildSecrets []BuildSecret `json:"buildSecrets,omitempty"`
}

// ConfigMapKeyReference names one key of a ConfigMap in the PoolImage's
// namespace.
type ConfigMapKeyReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key is the data key (default Containerfile).
	// +optional
	Key string `json:"key,omitempty"`
}

// BuildSecret is one build secret: a Secret key in the PoolImage's
// namespace, seen by the build as the secret ID.
type BuildSecret struct {
	// ID is what RUN --mount=type=secret,id=ID names.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][-A-Za-z0-9_.]*$`
	// +kubebuilder:validation:MaxLength=63
	ID string `json:"id"`
	// SecretName is the Secret.
	// +kubebuilder:validation:MinLength=1
	SecretName string `json:"secretName"`
	// Key is the Secret's data key.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// Publish says where the controller records the last good image besides
// status.image; it keeps each in step with status.image and removes it
// when the PoolImage (or the field) goes.
//
// +kubebuilder:validation:XValidation:rule="has(self.machineConfig) || has(self.configMap) || has(self.bootcNodePool)",message="publish: give machineConfig, configMap, bootcNodePool or several"
type Publish struct {
	// MachineConfig maintains a MachineConfig for the OpenShift source's
	// pool that sets osImageURL to status.image (the way OpenShift
	// documents to hand a pool a custom image): named
	// 99-<pool>-oslayer-os-image, labelled with the pool's role. The MCO's
	// next rendered MachineConfig carries the osImageURL; the controller
	// reads the rendered MachineConfig without it, so publishing never
	// triggers a build. Needs spec.source.openshift.
	// +optional
	MachineConfig *PublishMachineConfig `json:"machineConfig,omitempty"`
	// ConfigMap names a ConfigMap in the PoolImage's namespace that the
	// controller keeps with the current image (data keys image, digest,
	// pool, inputsDigest, baseDigest), owned by the PoolImage.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	ConfigMap string `json:"configMap,omitempty"`
	// BootcNodePool names a bootc-operator BootcNodePool (cluster-scoped)
	// whose spec.image.ref the controller keeps at status.image
	// (poolimage_bootc.go).
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	BootcNodePool string `json:"bootcNodePool,omitempty"`
}

// PublishMachineConfig is the osImageURL MachineConfig of the pool.
type PublishMachineConfig struct {
	// Role is the value of the machineconfiguration.openshift.io/role
	// label; default: the pool's name when its machineConfigSelector
	// selects it, else the role its selector's matchLabels name.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Role string `json:"role,omitempty"`
}

// Source is exactly one of the ways to name a pool's configuration.
//
// +kubebuilder:validation:XValidation:rule="(has(self.gardener) ? 1 : 0) + (has(self.openshift) ? 1 : 0) + (has(self.documents) ? 1 : 0) == 1",message="exactly one of gardener, openshift, documents"
type Source struct {
	// Gardener is the OperatingSystemConfig Secret gardener-node-agent
	// reads.
	// +optional
	Gardener *GardenerSource `json:"gardener,omitempty"`
	// OpenShift is a MachineConfigPool: the controller builds the pool's
	// rendered MachineConfig (status.configuration.name), the MCO's own
	// merge of the pool's MachineConfigs.
	// +optional
	OpenShift *OpenShiftSource `json:"openshift,omitempty"`
	// Documents are ConfigMaps and Secrets holding OperatingSystemConfig,
	// MachineConfig or MachineConfigPool documents (any cluster).
	// +optional
	Documents *DocumentsSource `json:"documents,omitempty"`
}

// GardenerSource is the node-agent's OSC Secret (data key osc.yaml), by
// name or by label selector.
//
// +kubebuilder:validation:XValidation:rule="has(self.secretName) != has(self.selector)",message="exactly one of secretName, selector"
type GardenerSource struct {
	// SecretName is the OSC Secret's name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	SecretName string `json:"secretName,omitempty"`
	// Selector selects the OSC Secret by its labels instead: the
	// node-agent's Secret (kube-system/gardener-node-agent-POOL-HASH) gets
	// a new name when the pool's settings change, its labels
	// (gardener.cloud/role: operating-system-config,
	// worker.gardener.cloud/pool: POOL) stay. When several Secrets match
	// (a pool rolling), the newest is built.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Namespace is the Secret's namespace; default: the PoolImage's.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// SecretRefs are the Secrets (in the same namespace) that the OSC's
	// secretRef files name.
	// +optional
	SecretRefs []string `json:"secretRefs,omitempty"`
}

// OpenShiftSource names a MachineConfigPool (cluster-scoped).
type OpenShiftSource struct {
	// MachineConfigPool is the pool's name (worker, master, infra, ...).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	MachineConfigPool string `json:"machineConfigPool"`
}

// DocumentsSource lists the objects whose data values are documents.
type DocumentsSource struct {
	// Objects are read in order; every data value of each (or the listed
	// keys) is one document whose kind says what it is.
	// +kubebuilder:validation:MinItems=1
	Objects []DocumentObject `json:"objects"`
}

// DocumentObject is a ConfigMap or Secret in the PoolImage's namespace.
type DocumentObject struct {
	// Kind is ConfigMap or Secret.
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	Kind string `json:"kind"`
	// Name is the object's name.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Keys limits the documents to these data keys (default: all).
	// +optional
	Keys []string `json:"keys,omitempty"`
}

// LocalObjectReference names an object in the PoolImage's namespace.
type LocalObjectReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// Signing names the cosign key Secret.
type Signing struct {
	// KeySecret is a Secret in the PoolImage's namespace holding the cosign
	// private key (data key cosign.key) and its password (cosign.password),
	// as cosign generate-key-pair k8s://NS/NAME writes it.
	KeySecret LocalObjectReference `json:"keySecret"`
	// Referrers also attaches the signature as an OCI 1.1 referrer (the
	// .sig tag nodes read is always written).
	// +optional
	Referrers bool `json:"referrers,omitempty"`
}

// PoolImageStatus is what the controller built and recorded.
type PoolImageStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// SourcesDigest is the digest of everything read from the source and
	// the spec for the last successful build; the same value again
	// builds nothing.
	// +optional
	SourcesDigest string `json:"sourcesDigest,omitempty"`
	// FailedSourcesDigest is the sources digest of a build that failed on
	// its input; the same input is not built again until it changes.
	// +optional
	FailedSourcesDigest string `json:"failedSourcesDigest,omitempty"`
	// InputsDigest is the image's inputs digest (its io.oslayer.inputs-digest
	// label).
	// +optional
	InputsDigest string `json:"inputsDigest,omitempty"`
	// BaseDigest is the digest the base resolved to.
	// +optional
	BaseDigest string `json:"baseDigest,omitempty"`
	// Image is the digested reference of the last good image.
	// +optional
	Image string `json:"image,omitempty"`
	// Signed reports whether Image is signed.
	// +optional
	Signed bool `json:"signed,omitempty"`
	// LastBuildTime is when the last build (good or not) ended.
	// +optional
	LastBuildTime *metav1.Time `json:"lastBuildTime,omitempty"`
	// Builds are the last few builds, newest first.
	// +optional
	Builds []BuildRecord `json:"builds,omitempty"`
	// BootcNodePool mirrors spec.publish.bootcNodePool's pool.
	// +optional
	BootcNodePool *BootcNodePoolStatus `json:"bootcNodePool,omitempty"`
	// Retention is the last run of spec.retention.
	// +optional
	Retention *RetentionStatus `json:"retention,omitempty"`
	// Published is the image spec.publish hands on, and why.
	// +optional
	Published *PublishedImage `json:"published,omitempty"`
	// Change is what the last change does to the nodes.
	// +optional
	Change *ImageChange `json:"change,omitempty"`
	// Rollback is the rollback spec.rollback made, while it holds.
	// +optional
	Rollback *RollbackStatus `json:"rollback,omitempty"`
	// Conditions are Ready, Building and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BuildRecord is one build's outcome.
type BuildRecord struct {
	// Image is the digested reference built (empty when the build failed
	// before one existed).
	// +optional
	Image string `json:"image,omitempty"`
	// InputsDigest is the build's inputs digest, when it got that far.
	// +optional
	InputsDigest string `json:"inputsDigest,omitempty"`
	// BaseDigest is the build's base digest.
	// +optional
	BaseDigest string `json:"baseDigest,omitempty"`
	// Time is when the build ended.
	Time metav1.Time `json:"time"`
	// Result is Succeeded or Failed.
	// +kubebuilder:validation:Enum=Succeeded;Failed
	Result string `json:"result"`
	// Seconds is the build's wall time.
	// +optional
	Seconds string `json:"seconds,omitempty"`
	// Message is why the build failed.
	// +optional
	Message string `json:"message,omitempty"`
	// Job is the build Job of spec.builder Job.
	// +optional
	Job string `json:"job,omitempty"`
	// Attempt counts the build Jobs of the same inputs in a row (spec.builder
	// Job): 1 for the first, one more for each retry of a run failure.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Attempt int32 `json:"attempt,omitempty"`
}
