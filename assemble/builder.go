// Package assemble assembles a pool image: it reads only the manifest and
// config of an ostree-native base image, appends the layers rendered by
// package layers, and records labels, history and provenance so that the same
// inputs always give the same image digest.
//
// Build runs the whole pipeline as one library call (a controller can run it
// many times in one process):
//
//	resolve base → render → assemble → content stages (preflight) →
//	    publish by digest → stages (preflight of the written image, sign,
//	    attest) → move tag
//
// A build stopped by a content check writes nothing to the target: stages
// that need only the assembled image implement PreWrite and run before
// the write.
//
// Assembly reads only the base's manifest and config. What rendering needs
// to know about the base (the units it ships, their [Install] sections, its
// enablement links, passwd/group, ...) comes from its base index (package
// baseindex): read once per base digest from its layers, then taken from the
// disk cache or from the artifact next to the images, so a second build on
// the same base reads no base blob. Request.BaseIndex "off" keeps the base
// unread and the result says what was assumed instead.
//
// The later stages live in packages that come after build in the pipeline
// (preflight, publish, sign); build only defines the interfaces they
// implement (Publisher, Stage, PreWrite, OnIndex), so it imports none of
// them. An image and a multi-platform index go through the same ones: a
// Built is either (IsIndex).
package assemble

import (
	"context"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/sources/model"
)

// LabelPrefix is the prefix of every label oslayer adds to an image config.
const LabelPrefix = "io.oslayer."

// The labels oslayer adds. Values are plain strings; KernelArgs is a JSON array.
const (
	LabelPool         = LabelPrefix + "pool"
	LabelInputsDigest = LabelPrefix + "inputs-digest"
	LabelKernelArgs   = LabelPrefix + "kernel-arguments"
	LabelVersion      = LabelPrefix + "version"
	LabelBaseDigest   = LabelPrefix + "base-digest"
)

// HistoryCommentPrefix starts the config history comment of every layer
// oslayer adds ("oslayer layer NAME"): the added layers of an image are
// known from its history even when its base has no ostree.final-diffid.
const HistoryCommentPrefix = "oslayer layer "

// Base is the resolved base image. Image is lazy: reading its layers' blobs
// would download them, which builder never does.
type Base struct {
	// Ref is the reference as the user gave it (before mirror rewriting, so
	// a build through a mirror records the same base as one without).
	Ref string `json:"ref"`
	// Digest is the manifest digest the reference resolved to.
	Digest v1.Hash `json:"digest,omitzero"`
	// Pinned reports whether the user gave a digest (not a tag).
	Pinned bool     `json:"pinned"`
	Image  v1.Image `json:"-"`
	// Index is the base's index once resolved (IndexBase); builds that
	// share one Base share it.
	Index *baseindex.Index `json:"-"`
}

// Built is what a build assembled and has not published yet: one image
// (Image), or for a multi-platform build an OCI index (Index) of one
// Built image per platform (Platforms, in index order, each written
// before the index). An index's Built sets only Index, Digest, Pool and
// Platforms. Publishers and stages take either (IsIndex tells them
// apart), as ko's publishers take an image or an index as one
// build.Result.
type Built struct {
	Image v1.Image
	// Index is the multi-platform build's index (nil for an image).
	Index v1.ImageIndex
	// Platforms are an index's platform images, in index order.
	Platforms []*Built
	// Digest is the image's or the index's manifest digest.
	Digest v1.Hash
	Base   Base
	// Official is the official base when Base is a package base built
	// from it (nil otherwise): its layers must be a prefix of the image.
	Official *Base
	// Added are the layers appended on top of the base, in order.
	Added []AddedLayer
	// Pool names the pool the image is for.
	Pool string
	// Inputs are the input documents (path, kind, sha256) for provenance.
	Inputs []model.Input
	// InputsDigest is the digest over every input and output-changing flag.
	InputsDigest string
	// KernelArgs are the pool's kernel arguments (also in a label).
	KernelArgs []string
	// Flags are the options that change the output, for provenance.
	Flags map[string]string
	// Warnings are what the user should know about (unpinned base, base
	// without bootable label, ...).
	Warnings []string
	// Files are the items oslayer placed, as the ownership manifest lists
	// them (path, type, digest, layer and the document and field each
	// came from), for the SBOM.
	Files []render.Baked
}

// IsIndex reports whether b is a multi-platform build's index.
func (b *Built) IsIndex() bool { return b != nil && b.Index != nil }

// AddedLayer describes one appended layer.
type AddedLayer struct {
	Digest v1.Hash `json:"digest"`
	DiffID v1.Hash `json:"diffID"`
	Size   int64   `json:"size"`
	Source string  `json:"source"`
}

// Published is where an image or index was written by digest (not yet
// tagged).
type Published struct {
	// Ref is the digested reference, e.g. "127.0.0.1:5000/pool@sha256:...",
	// or "oci:DIR@sha256:..." for a layout.
	Ref string
	// Digest is the digested registry reference; nil for OCI layouts.
	Digest *name.Digest
	// Uploaded and Skipped count bytes: Skipped includes blobs the target
	// already had and blobs that were cross-repo mounted.
	Uploaded int64
	Skipped  int64
	Mounted  int64
	// Found is set when the publisher found the image there already and
	// sent nothing of it.
	Found bool
	// Proven is set when the write itself proved what reading the image
	// back by digest would: the registry answered the manifest's PUT by
	// digest with that digest (Docker-Content-Digest), and a registry
	// accepts a manifest only with every blob it names in the repository
	// (each uploaded against its digest, mounted, or proven by a manifest
	// there). A stage that would read the image back learns nothing more.
	Proven bool
	// Attached are manifests stages stored next to the image in an OCI
	// layout (signatures, attestations): Commit lists them in the
	// layout's index.json together with the tag. Registry targets keep
	// them under their own tags instead.
	Attached []Attached
	// Record is the build record a stage wrote for the image in a
	// registry (publish/record), nil without one; the sign stage signs
	// it with the image.
	Record *v1.Descriptor
	// TagCurrent is true when Write found the target's tag naming the
	// image already (an unchanged rebuild): Commit moves nothing.
	TagCurrent bool
}

// Attached is a manifest a stage wrote into an OCI layout for the image
// (its blobs are there); Kind is its "kind" annotation in index.json.
type Attached struct {
	Kind       string        `json:"kind"`
	Descriptor v1.Descriptor `json:"descriptor"`
}

// Publisher writes what was built, an image or an index, by digest and,
// once every stage succeeded, moves the tag. If Commit is never called
// the tag stays where it was. An index is written after its platform
// images (Write of each): a registry refuses an index naming a manifest
// it lacks.
type Publisher interface {
	Write(ctx context.Context, b *Built) (*Published, error)
	Commit(ctx context.Context, b *Built, p *Published) error
}

// Starter is implemented by a publisher that begins, while the image is
// built, what its next Write does first and needs nothing of the image
// for (connecting to the target, looking at its tag): across a WAN those
// round trips then cost no time. base is the base's reference ("" when
// not known yet). Start sends only reads; what it learnt goes to the
// next Write, which sends them itself when Start was not called.
type Starter interface {
	Start(ctx context.Context, base string)
}

// Stage runs after the image is written by digest and before the tag moves
// (preflight, signature, attestation). An error stops the build; the tag does
// not move. The returned value is recorded in the build result under Name.
// A multi-platform build runs it on each platform's image and, when it
// implements OnIndex, on the written index too.
type Stage interface {
	Name() string
	Run(ctx context.Context, b *Built, p *Published) (any, error)
}

// OnIndex is implemented by the stages that apply to a multi-platform
// build's index as well as to its platform images (the signature): Build
// runs them on the written index after every platform succeeded and
// before the tag moves. The others (preflight, the provenance, which
// names one platform's base and layers) run per platform only.
type OnIndex interface {
	OnIndex() bool
}

// RunsOnIndex reports whether s runs on a multi-platform build's index.
func RunsOnIndex(s Stage) bool {
	oi, ok := s.(OnIndex)
	return ok && oi.OnIndex() && !IsPreWrite(s)
}

// PreWrite is implemented by stages that read only the assembled image (its
// manifest, config and layer content), not what was written: the content
// checks of preflight. Build runs every stage whose PreWrite returns true
// before Publisher.Write, in the order given and with a nil *Published, so
// a build they stop writes no blob to the target. The other stages run
// after the write, in the order given.
type PreWrite interface {
	PreWrite() bool
}

// IsPreWrite reports whether s runs before the image is written.
func IsPreWrite(s Stage) bool {
	pw, ok := s.(PreWrite)
	return ok && pw.PreWrite()
}

// OutputFlags are the options that change a build's output, recorded in
// its provenance (Request.Flags): oslayer build and a fleet build of the
// same pool record the same and give the same image digest.
type OutputFlags struct {
	Pool          string
	Base          string
	BaseIndex     string
	Arch          string
	BakeSecrets   bool
	AllowTopLevel []string
}

// Map returns the flags as provenance records them.
func (f OutputFlags) Map() map[string]string {
	m := map[string]string{"pool": f.Pool}
	if f.Base != "" {
		m["base"] = f.Base
	}
	if f.BaseIndex == BaseIndexOff {
		m["base-index"] = BaseIndexOff
	}
	if f.Arch != "" {
		m["arch"] = registry.NormalizeArch(f.Arch)
	}
	if f.BakeSecrets {
		m["bake-secrets"] = "true"
	}
	if len(f.AllowTopLevel) > 0 {
		m["allow-toplevel"] = strings.Join(f.AllowTopLevel, ",")
	}
	return m
}
