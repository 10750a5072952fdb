// Package pipeline is the one build specification every front-end maps
// onto, and the one function that turns a specification into the
// pipeline that runs it.
//
// A Spec holds every option that changes what is built or how it is
// checked, published and signed: the inputs, the base, the platforms, the
// target, the registries (mirrors, credentials), the base index, the
// package stage, preflight and signing. oslayer build's flags, a fleet
// plan's pool, a PoolImage's spec and the Gardener extension's
// providerConfig are each a thin mapping onto it (cmd/oslayer
// buildFlags.spec, fleet Pool.Spec, controller SpecOf, the extension
// actuator's specOf); New
// turns it into the build request, the publisher and the stages, and
// Pipeline.Run runs them (build.Build). A front-end that builds many
// pools prepares them first (Pipeline.Prepare, through one Cache): a Plan
// has an Identity computed from the whole specification and the renders,
// and plans of one identity become one image (Plan.Build, then
// Pipeline.Retag). What a front-end shares between builds without
// changing any image (connections, known blobs, decrypted keys, imageRef
// readers, the Cache, logs) is its Env. Front-ends that run builds import
// this package and no stage: it names what they read of a build (Result,
// Phase, the step names, keys).
//
// The build settings all of them write the same way are one wire type,
// settings.Settings, which they embed; SetSettings is its one mapping
// and Flags the table oslayer build registers their flags from.
//
// The mappings reach the same fields, except those Absent lists for a
// front-end with the reason (TestSpecParity in cmd/oslayer, and in the
// extension's module, fails otherwise).
package pipeline

import (
	"time"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/sign"
)

// Spec is one build: everything that changes what is built or how it is
// checked, published and signed. The zero values are the defaults the
// comments name. Field names in errors are the JSON names of the fleet
// plan and the PoolImage spec (preflight.maxLayers).
type Spec struct {
	// Inputs are the pool's documents and how they are read.
	Inputs Inputs
	// Base is the base image: a registry reference (pin @sha256:...) or
	// oci:DIR[:TAG]; "" means the MachineConfigs' osImageURL.
	Base string
	// Arch are the platforms to build for, parsed once by the front-end
	// (ParsePlatforms): none (amd64), one (that platform's image),
	// several (one image per platform, published as one OCI index) or
	// ArchAll alone (every platform of the base's index). x86_64, aarch64
	// are amd64, arm64.
	Arch Platforms
	// Target is where the image goes: REG/REPO[:TAG] or oci:DIR[:TAG]
	// (the tag defaults to latest). The tag moves last.
	Target string
	// Registry reaches the base, the target and imageRef images:
	// mirrors, credentials, insecure hosts, parallel uploads, timeout.
	// nil means the zero Options.
	Registry *registry.Options
	// RequestJobs bounds an image's blob requests at once (mounts,
	// checks, uploads, reads of the base for its index; 1 to 256): the
	// settings' requestJobs. 0 keeps Registry's (registry.Options.Requests).
	RequestJobs int
	// BaseIndex is how the base is read: "" or "auto" (its index, cached
	// and shared) or "off" (never read; the result says what was assumed).
	BaseIndex string
	// IndexCacheDir is the base index disk cache ("": none).
	IndexCacheDir string
	// Packages runs the package stage with these inputs (nil: no stage;
	// a pool with extensions or kernelType is then refused).
	Packages *Packages
	// Preflight are the checks' options.
	Preflight Preflight
	// Signing signs and attests the image (nil: unsigned).
	Signing *Signing
}

// Inputs are a pool's documents and how they are read.
type Inputs struct {
	// Pool is the pool's name (the OSC's pool, the MachineConfig role).
	Pool string
	// OSCs, MachineConfigs and MachineConfigPools are files (or, for
	// MachineConfigs, directories) of documents; "-" reads Env.Stdin.
	OSCs               []string
	MachineConfigs     []string
	MachineConfigPools []string
	// SecretsDir holds the Secret manifests of Gardener secretRef files.
	SecretsDir string
	// BakeSecrets bakes secretRef content, and the credentials a
	// MachineConfig holds that the platform delivers itself
	// (machineconfig.CredentialPaths), into the image.
	BakeSecrets bool
	// Strict refuses OSC fields the API does not have.
	Strict bool
	// AllowTopLevel are extra top-level directories content may go to.
	AllowTopLevel []string
	// Epoch is the created time of the image and every file
	// (SOURCE_DATE_EPOCH; zero: 1970).
	Epoch time.Time
	// ImageRefs reads Gardener imageRef files within these bounds (nil:
	// an imageRef file is refused).
	ImageRefs *ImageRefs
}

// ImageRefs bound what the imageRef files of a build read.
type ImageRefs struct {
	// Budget is the total size of the files (0: the reader's default).
	Budget int64
	// Timeout bounds reading them all (0: the reader's default).
	Timeout time.Duration
}

// Packages are the package stage's own inputs (see packagestage/bud).
type Packages struct {
	// Containerfile is the user's Containerfile (its final stage FROM
	// packages) and ContainerfileName where it came from; ContextDir is
	// its build context ("": none).
	Containerfile     []byte
	ContainerfileName string
	ContextDir        string
	// BuildArgs are the Containerfile's build arguments.
	BuildArgs map[string]string
	// Secrets are build secrets: id to the file holding it.
	Secrets map[string]string
	// Repos are repository definitions by file name (NAME.repo).
	Repos map[string][]byte
}

// Preflight are the options of the preflight checks.
type Preflight struct {
	// Skip names checks not to run.
	Skip []string
	// ExpectVersion is the OS version the image must have.
	ExpectVersion string
	// FatalWarnings fails the build on warnings.
	FatalWarnings bool
	// DenyUsrOverride fails the build when an added file replaces one of
	// the base under /usr.
	DenyUsrOverride bool
	// RequireBase is an official base whose layers must be an ordered
	// prefix of the image's.
	RequireBase string
	// AllowSecrets are paths (or path.Match patterns) that may hold a
	// secret. A MachineConfig credential the platform delivers itself is
	// baked only when named here (or BakeSecrets): one rule for every
	// front-end.
	AllowSecrets []string
	// MaxAddedBytes bounds the compressed added layers (0: 2 GiB).
	MaxAddedBytes int64
	// WarnLayers and MaxLayers are the layer count limits (0: the
	// defaults, 127 and 500).
	WarnLayers int
	MaxLayers  int
}

// Signing is the signing key and where the signature goes.
type Signing struct {
	// Key is the encrypted cosign key and where it came from.
	Key *sign.KeyMaterial
	// Password is the key's password when it carries none (nil: empty).
	Password sign.PassFunc
	// Referrers also attaches the signature as an OCI 1.1 referrer.
	Referrers bool
	// Identity is, for an OCI layout target, the repository nodes pull
	// the image from (its signature names it).
	Identity string
}
