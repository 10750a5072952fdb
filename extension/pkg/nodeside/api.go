package nodeside

import (
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
)

// Paths on the node of what a reconcile adds.
const (
	// PoolImageFile records the pool image the node should run (one line:
	// the digested reference).
	PoolImageFile = "/etc/oslayer/pool-image"
	// UpdateCommand is the in-place update command gardener-node-agent
	// runs (status.inPlaceUpdates.osUpdate.command).
	UpdateCommand = "/opt/oslayer/bin/os-update"
	// StageUnit is the unit that stages the pool image for the next boot
	// (status.extensionUnits).
	StageUnit = "oslayer-stage-pool-image.service"
)

// Provision is the input of the provision user data.
type Provision struct {
	// OSC is the OperatingSystemConfig of purpose provision.
	OSC *extensionsv1alpha1.OperatingSystemConfig
	// Secrets resolves the OSC's secretRef file contents: Secret name →
	// data key → bytes (the Secrets in the OSC's namespace).
	Secrets map[string]map[string][]byte
	// Image is the pool image's digested reference ("": no pivot, the
	// machine boots the plain base and joins; the extension leaves it
	// unset only when the pool has no image to offer, and the staging
	// unit of the reconcile stages the pool image for such a node's next
	// boot).
	Image string
	// Policy is the containers policy.json (as `oslayer trust` writes it)
	// that enforces the image's signature on the pivot; empty: no pivot
	// policy is written.
	Policy []byte
	// SigstoreConfig is the registries.d file that goes with Policy.
	SigstoreConfig []byte
	// PublicKey is the cosign public key Policy names, written to the
	// path Policy refers to.
	PublicKey []byte
}

// Reconcile is the input of what a reconcile adds to the node.
type Reconcile struct {
	// Image is the pool image's digested reference.
	Image string
	// Version is the operating system version the image carries in
	// /etc/os-release PRETTY_NAME (spec.inPlaceUpdates.operatingSystemVersion).
	Version string
}

// UserData returns the Ignition v3 config (JSON) a new machine of the
// pool boots with: the provision OSC's files and units, and, when p.Image
// is set, the pivot onto it by digest with its signature enforced.
func UserData(p Provision) ([]byte, error) {
	return userData(p)
}

// ExtensionFiles are the files a reconcile adds (status.extensionFiles):
// the pool-image record and the update command.
func ExtensionFiles(r Reconcile) []extensionsv1alpha1.File {
	return extensionFiles(r)
}

// ExtensionUnits are the units a reconcile adds (status.extensionUnits):
// the unit that stages the pool image for the next boot.
func ExtensionUnits(r Reconcile) []extensionsv1alpha1.Unit {
	return extensionUnits(r)
}

// OSUpdate is status.inPlaceUpdates.osUpdate: the command that switches
// the node to r.Image (`os-update IMAGE [VERSION]`, VERSION only
// reported).
func OSUpdate(r Reconcile) *extensionsv1alpha1.OSUpdate {
	args := []string{r.Image}
	if r.Version != "" {
		args = append(args, r.Version)
	}
	return &extensionsv1alpha1.OSUpdate{Command: UpdateCommand, Args: args}
}
