package diff

import (
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/sources/model"
)

// Side is one end of a diff: a pool image, or an input set rendered
// without building.
type Side struct {
	// Given is the reference or the inputs as the user named them.
	Given string `json:"given"`
	// Kind is "image" or "inputs".
	Kind string `json:"kind"`
	// Digest is the image's manifest digest (images only).
	Digest string `json:"digest,omitempty"`
	Pool   string `json:"pool,omitempty"`
	// Arch is the image's architecture (images only).
	Arch string `json:"arch,omitempty"`
	// BaseDigest, OSVersion and Kernel describe the base (the labels
	// io.oslayer.base-digest, org.opencontainers.image.version and
	// ostree.linux); inputs know them only with a base.
	BaseDigest string   `json:"baseDigest,omitempty"`
	OSVersion  string   `json:"osVersion,omitempty"`
	Kernel     string   `json:"kernel,omitempty"`
	KernelArgs []string `json:"kernelArgs"`
	// PackageKey is the package stage's key (label io.oslayer.package-key),
	// empty without a package stage.
	PackageKey string `json:"packageKey,omitempty"`
	// Extensions, KernelType and OSImageURL are the package inputs and
	// the MachineConfigs' base (inputs only: an image records the key).
	Extensions   []string `json:"extensions,omitempty"`
	KernelType   string   `json:"kernelType,omitempty"`
	OSImageURL   string   `json:"osImageURL,omitempty"`
	InputsDigest string   `json:"inputsDigest,omitempty"`
	// Layers are the image's layers (the rendered layers for inputs).
	Layers []Layer `json:"layers"`

	// Items are the ownership manifest's entries.
	Items []render.ManifestItem `json:"-"`
	// Runtime lists items delivered at runtime (inputs only).
	Runtime []model.Runtime `json:"-"`
	// Passwd is a digest of the MachineConfigs' passwd sections in merge
	// order (inputs only), FIPS whether any sets spec.fips.
	Passwd string `json:"-"`
	FIPS   bool   `json:"-"`
	// FilePaths are the OperatingSystemConfig units' filePaths (inputs
	// only).
	FilePaths map[string][]string `json:"-"`

	// open reads the side's own layers (ReadFile).
	open openLayer
}

// Layer is one layer of a side.
type Layer struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
	// Role is "payload", "config" or "metadata" for oslayer's layers,
	// "base" for the others.
	Role string `json:"role"`
}

// image reports whether the side is a built image.
func (s *Side) image() bool { return s.Kind == "image" }

// sourceKinds lists the document kinds the side's items came from.
func (s *Side) sourceKinds() map[string]bool {
	kinds := map[string]bool{}
	for _, it := range s.Items {
		if it.Source.Kind != "" {
			kinds[it.Source.Kind] = true
		}
	}
	for _, r := range s.Runtime {
		if r.Origin.Kind != "" {
			kinds[r.Origin.Kind] = true
		}
	}
	return kinds
}
