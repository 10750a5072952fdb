// Package record writes and reads the build record of a pool image: a
// small OCI artifact under the tag "sha256-HEX.rec" next to the image
// (cosign's naming for what belongs to a digest), written by every build
// (the record stage, which the pipeline runs first after the image is
// written by digest and before anything else names it) before the tag
// moves, and signed with the image when signing is on.
//
// The record says when the image was built, by which oslayer and for
// which pool and inputs. It is separate from the image, whose digest it
// does not change: the same inputs still give the same image, and a
// rebuild of an image already there writes a new record (the image is
// new again for retention). Prune dates images by it.
//
// The record is the manifest's annotations: reading it costs one request,
// and writing it one PUT (its config is the image's own config blob,
// already in the repository: no blob is uploaded).
package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ArtifactType is the record manifest's artifactType and its config's
// media type.
const ArtifactType = "application/vnd.oslayer.build-record.v1+json"

// TagSuffix ends a record's tag: "sha256-HEX" + TagSuffix.
const TagSuffix = ".rec"

// The manifest annotations of a record.
const (
	AnnotationImage        = "io.oslayer.record.image"
	AnnotationTime         = "io.oslayer.record.time"
	AnnotationPool         = "io.oslayer.record.pool"
	AnnotationVersion      = "io.oslayer.record.version"
	AnnotationInputsDigest = "io.oslayer.record.inputs-digest"
	AnnotationBaseDigest   = "io.oslayer.record.base-digest"
)

// Builder names the builder in a record.
const Builder = "oslayer"

// Record is one build of an image.
type Record struct {
	// Image is the digest of the image or index the build wrote.
	Image v1.Hash `json:"image"`
	// Time is when the build wrote its record: after the image was
	// written by digest, before anything else named it and before the
	// tag moved.
	Time time.Time `json:"time"`
	// Builder and Version name what built it ("oslayer", its version).
	Builder string `json:"builder"`
	Version string `json:"version,omitempty"`
	// Pool is the pool the image is for.
	Pool string `json:"pool,omitempty"`
	// InputsDigest identifies the build's specification: the inputs and
	// every option that changes the image.
	InputsDigest string `json:"inputsDigest,omitempty"`
	// BaseDigest is the base the image was built on.
	BaseDigest string `json:"baseDigest,omitempty"`
}

// Tag is the tag of the record of image d in repo.
func Tag(repo name.Repository, d v1.Hash) name.Tag {
	return repo.Tag(TagName(d))
}

// TagName is the tag name of the record of d: "sha256-HEX.rec".
func TagName(d v1.Hash) string { return d.Algorithm + "-" + d.Hex + TagSuffix }

// annotations are r as manifest annotations.
func (r Record) annotations() map[string]string {
	a := map[string]string{
		AnnotationImage: r.Image.String(),
		AnnotationTime:  r.Time.UTC().Format(time.RFC3339Nano),
	}
	for k, v := range map[string]string{AnnotationPool: r.Pool, AnnotationVersion: r.Version,
		AnnotationInputsDigest: r.InputsDigest, AnnotationBaseDigest: r.BaseDigest} {
		if v != "" {
			a[k] = v
		}
	}
	return a
}

// manifest is the record manifest: an OCI image manifest with the
// record's artifactType and annotations and no layers.
type manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     types.MediaType   `json:"mediaType"`
	ArtifactType  string            `json:"artifactType"`
	Config        v1.Descriptor     `json:"config"`
	Layers        []v1.Descriptor   `json:"layers"`
	Annotations   map[string]string `json:"annotations"`
}

// Encode returns the record's manifest, whose config is the descriptor
// config: the image's own config blob, which is in the repository
// already, so writing a record uploads no blob (EmptyConfig for a caller
// without one).
func Encode(r Record, config v1.Descriptor) ([]byte, error) {
	if r.Image.Hex == "" || r.Time.IsZero() {
		return nil, fmt.Errorf("build record: no image digest or time")
	}
	return json.Marshal(manifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: ArtifactType,
		Config: config, Layers: []v1.Descriptor{}, Annotations: r.annotations(),
	})
}

// EmptyConfig is the OCI empty descriptor ("{}"), the config of a record
// written without its image's config.
var EmptyConfig = v1.Descriptor{MediaType: "application/vnd.oci.empty.v1+json", Size: 2,
	Digest: v1.Hash{Algorithm: "sha256", Hex: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}}

// Parse reads a record from its manifest's annotations. A manifest that
// is not a record, or a record without an image digest or a valid time,
// is an error.
func Parse(mf []byte) (*Record, error) {
	var m manifest
	if err := json.Unmarshal(mf, &m); err != nil {
		return nil, fmt.Errorf("build record: %v", err)
	}
	if m.ArtifactType != ArtifactType {
		return nil, fmt.Errorf("build record: artifactType %q, want %q", m.ArtifactType, ArtifactType)
	}
	a := m.Annotations
	d, err := v1.NewHash(a[AnnotationImage])
	if err != nil {
		return nil, fmt.Errorf("build record: annotation %s: %v", AnnotationImage, err)
	}
	t, err := time.Parse(time.RFC3339Nano, a[AnnotationTime])
	if err != nil {
		return nil, fmt.Errorf("build record: annotation %s: %v", AnnotationTime, err)
	}
	return &Record{Image: d, Time: t, Builder: Builder, Version: a[AnnotationVersion], Pool: a[AnnotationPool],
		InputsDigest: a[AnnotationInputsDigest], BaseDigest: a[AnnotationBaseDigest]}, nil
}

// bytesReader reads b.
func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
