// Package layers renders node configuration (Gardener OperatingSystemConfigs,
// OpenShift MachineConfigs) into the content of the layers that sit on top of
// an ostree-native OS image: a file tree with exact modes, owners and links,
// deterministic gzip tar layers of it, and a report that accounts for every
// input item.
//
// The pipeline is: sources (layers/gardener, layers/machineconfig) decode
// documents into a model.Config; Render merges them (model.Merge), applies
// the ostree placement rules, unit enablement and the /var mechanism, builds
// the tree (layers/tree) and splits it into at most three layers
// (layers/tarball).
//
// # Placement (ostree rules)
//
//   - /etc/** and /usr/** are written as they are (never usr/etc/).
//   - /var/**, /opt/**, /usr/local/**, /root/**, /home/**, /srv/** and
//     /mnt/** (the last six are symlinks into /var on FCOS and RHCOS) are stored under /usr/lib/oslayer/var and materialised on the
//     node by tmpfiles.d rules plus a prune unit (layers/varmech).
//   - Children of /run, /tmp, /proc, /sys, /dev and anything under /boot,
//     /sysroot or /usr/etc are errors naming the source and the path; other
//     top-level directories are errors unless listed in
//     Request.AllowTopLevel (they survive only on composefs bases).
//   - Units go to /etc/systemd/system/NAME, drop-ins to
//     /etc/systemd/system/NAME.d/DROPIN (0644, or the source's mode: 0600
//     for Gardener, as gardener-node-agent writes them). Enabled units get exactly
//     the links `systemctl --root enable` creates (layers/systemd); masked
//     units a link to /dev/null. Units are looked up as systemctl does in
//     the image being built: the configuration's files (units, drop-ins,
//     mask links, files in unit directories) over Request.Base when set, so
//     an [Install] section in a drop-in (the configuration's or the
//     base's), instances of configured templates and Also= resolve as on
//     the node. A unit found in neither gets no link when Request.Base is
//     set (systemctl enable fails there; the report warns), and
//     WantedBy=multi-user.target plus the [Install] lines of its configured
//     drop-ins when it is not (the report says what was assumed). A
//     disabled unit loses the links `systemctl --root disable` removes:
//     this layer's are not created, the base's (and directories left
//     empty) are removed with whiteouts (tree.Whiteout, ".wh." entries).
//     PresetPath holds an "enable" rule for every enabled unit and a
//     "disable" rule for every disabled one that was enabled (as Ignition
//     writes them), so that presets applied on a first boot keep that
//     enablement; Report.FirstBoot lists the links a first boot's presets
//     still add, with a warning for one that undoes a disable. A file
//     written under /usr where the base has one is a warning.
//     A unit that cannot be loaded (masked, linked, unreadable) or enabled
//     (e.g. a template without DefaultInstance= wanted by a plain target)
//     is an error naming the document, the field and the unit, as
//     systemctl fails there too.
//     Units the node agent starts whenever it applies the configuration
//     (model.Unit.StartOnApply) that get no enablement links are started
//     at boot by StartTarget, and the report says so.
//   - Kernel arguments go to /usr/lib/bootc/kargs.d/10-oslayer.toml and to
//     Result.KernelArgs; extensions and kernelType to Result.Packages.
//
// # Layer split
//
// At most three layers, bottom first, empty ones omitted:
//
//  1. "payload": content read from images (Gardener imageRef) and every
//     file of PayloadThreshold (1 MiB) or more: large, stable binaries.
//  2. "config": everything else (config files, units, links, drop-ins,
//     generated tmpfiles.d rules, kargs.d): small and volatile.
//  3. "metadata": the ownership manifest /usr/lib/oslayer/manifest.json
//     (path, stored path, type, mode, owner, sha256, layer, source document
//     and field of everything oslayer writes), which changes whenever
//     anything changes.
//
// A change to a sysctl file therefore re-uploads only the small config and
// metadata layers, never a 100 MB kubelet; a new kubelet re-uploads payload
// and metadata only. Layer bytes depend only on the content: source
// document names inside the image are base names, and every mtime is
// Request.Epoch (SOURCE_DATE_EPOCH in the CLI, else DefaultEpoch).
package render

import (
	"io"
	"io/fs"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/render/tree"
	"github.com/oslayer/oslayer/sources/model"
)

// Request is what to render.
type Request struct {
	// OSCs are Gardener inputs: OperatingSystemConfig YAML/JSON, a Secret
	// manifest with data key osc.yaml, or a bare osc.yaml. "-" is read
	// from Stdin.
	OSCs []string
	// Stdin is read for an OSC named "-".
	Stdin io.Reader
	// MachineConfigs are MachineConfig files or directories of them.
	MachineConfigs []string
	// Pool selects MachineConfigs labelled machineconfiguration.openshift.io/role=Pool,
	// or names the MachineConfigPool to use when MachineConfigPools holds several.
	Pool string
	// MachineConfigPools are files with MachineConfigPool objects; the pool
	// (the only one, or the one named Pool) selects MachineConfigs by its
	// spec.machineConfigSelector as the MCO does.
	MachineConfigPools []string
	// SecretsDir holds Secret manifests for Gardener secretRef files.
	SecretsDir string
	// BakeSecrets bakes secretRef content into the image (off by default:
	// an image is readable by everyone who can pull it). It bakes the
	// credentials a MachineConfig holds (the pull secret) too.
	BakeSecrets bool
	// AllowSecrets are preflight's allowSecrets: a MachineConfig
	// credential they name is baked (bakeCredential).
	AllowSecrets []string
	// Strict refuses Gardener OSC fields the OSC API does not have; by
	// default they are ignored with a warning, as gardener-node-agent
	// ignores them.
	Strict bool
	// AllowTopLevel lists extra top-level directories (e.g. "srv") that may
	// receive content; they only survive on composefs bases.
	AllowTopLevel []string
	// Images reads imageRef files. Nil makes any imageRef an error.
	Images model.ImageFiles
	// Base, if set, is the base image's root tree; enablement reads the
	// units the OS ships and their drop-ins from it. It should implement
	// fs.ReadLinkFS (os.DirFS does) so that symlinks resolve in the tree.
	Base fs.FS
	// BaseName names the base image in messages (its reference).
	BaseName string
	// Epoch is the mtime of every tar entry. Zero means DefaultEpoch, or
	// SOURCE_DATE_EPOCH when the caller read it from the environment.
	Epoch time.Time
}

// DefaultEpoch is the fixed mtime of every entry when SOURCE_DATE_EPOCH is not
// set: 2000-01-01T00:00:00Z. (ostree zeroes mtimes on the node; mtimes only
// feed the digest.)
var DefaultEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Layer is one rendered, compressed layer.
type Layer struct {
	// Name is the layer's role: "payload", "config" or "metadata".
	Name string `json:"name"`
	// CreatedBy is the history entry text naming the layer's sources.
	CreatedBy string `json:"createdBy"`
	// Digest is the sha256 of the gzip bytes; DiffID of the tar bytes.
	Digest v1.Hash `json:"digest"`
	DiffID v1.Hash `json:"diffID"`
	Size   int64   `json:"size"`
	Files  int     `json:"files"`
	// Gzip is the compressed layer.
	Gzip []byte `json:"-"`
}

// Result is a rendered pool configuration.
type Result struct {
	// Layers are the non-empty layers in order (bottom first), at most 5.
	Layers []Layer `json:"layers"`
	// Report accounts for every input item.
	Report *Report `json:"report"`
	// KernelArgs are the pool's kernel arguments, in order.
	KernelArgs []string `json:"kernelArgs,omitempty"`
	// Packages lists what needs a package stage (MachineConfig extensions,
	// "kernelType:realtime"); build runs the package stage for a non-empty
	// list (builder.PackageStage) and refuses it without one.
	Packages []string `json:"packages,omitempty"`
	// Extensions and KernelType are the pool's package inputs as the
	// package stage takes them (KernelType "" or "default": the base's).
	Extensions []string `json:"extensions,omitempty"`
	KernelType string   `json:"kernelType,omitempty"`
	// OSImageURL is the pool's base from MachineConfigs, if any.
	OSImageURL string `json:"osImageURL,omitempty"`
	// Inputs are the input documents with their sha256.
	Inputs []model.Input `json:"inputs"`
	// InputsDigest is "sha256:..." over every input document and every
	// option that changes the output.
	InputsDigest string `json:"inputsDigest"`

	// tree is the union of the layers, for WriteDir.
	tree *tree.Tree
}
