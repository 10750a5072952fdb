package prune

import (
	"bytes"
	"regexp"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image is one image of a pruned repository or layout, with what decided
// its fate.
type Image struct {
	// Repo is the repository ("REG/REPO") or the layout ("oci:DIR").
	Repo   string          `json:"repository"`
	Digest v1.Hash         `json:"digest"`
	Media  types.MediaType `json:"mediaType,omitempty"`
	// Platforms are an index's platform images.
	Platforms []v1.Hash `json:"platforms,omitempty"`
	// Index is the index this platform image belongs to.
	Index *v1.Hash `json:"index,omitempty"`
	// Pool is the image's io.oslayer.pool label ("" for other images).
	Pool string `json:"pool,omitempty"`
	// BaseDigest is its io.oslayer.base-digest label.
	BaseDigest string `json:"baseDigest,omitempty"`
	// Tags are the tags naming it (attachment tags aside).
	Tags []string `json:"tags,omitempty"`
	// Attached are its signature, attestation, SBOM and referrer tags.
	Attached []Attachment `json:"attached,omitempty"`
	// Record is the digest of its build record's manifest, as listed.
	Record string `json:"record,omitempty"`
	// Time dates the image (zero: undated); TimeFrom says by what.
	Time     time.Time `json:"time,omitzero"`
	TimeFrom string    `json:"timeFrom,omitempty"`
	// Age is the age at the run's time ("-": undated), as the table shows.
	Age string `json:"age"`
	// Gone is true when the manifest is missing: only attachments are left.
	Gone bool `json:"gone,omitempty"`
	// Failed is true when a build record says its build failed.
	Failed bool `json:"failed,omitempty"`
	// Action is "keep", "delete" (dry run) or "deleted"; Reasons say why.
	Action  string   `json:"action"`
	Reasons []string `json:"reasons"`
}

// Attachment is a tag that belongs to an image: cosign's
// "sha256-HEX.sig", ".att" and ".sbom", the build record's ".rec" (and
// the tags of the record's own signature), and the OCI referrers
// fallback tag "sha256-HEX".
type Attachment struct {
	// Tag is the tag; in an OCI layout, where attachments are index.json
	// entries, it is empty and Digest names the manifest.
	Tag    string `json:"tag,omitempty"`
	Digest string `json:"digest,omitempty"`
	Kind   string `json:"kind"`
}

// attachedRE matches the tags cosign and the referrers fallback derive
// from a digest.
var attachedRE = regexp.MustCompile(`^sha256-([0-9a-f]{64})(?:\.(sig|att|sbom|rec))?$`)

// attachKinds names what each suffix holds.
var attachKinds = map[string]string{"sig": "signature", "att": "attestation", "sbom": "sbom", "rec": kindRecord, "": "referrers"}

// kindRecord is the kind of a build record tag (publish/record).
const kindRecord = "record"

// attachedTo returns the digest an attachment tag belongs to and its kind.
func attachedTo(tag string) (v1.Hash, string, bool) {
	m := attachedRE.FindStringSubmatch(tag)
	if m == nil {
		return v1.Hash{}, "", false
	}
	return v1.Hash{Algorithm: "sha256", Hex: m[1]}, attachKinds[m[2]], true
}

// Signed reports whether the image has a signature tag.
func (im *Image) Signed() bool {
	for _, a := range im.Attached {
		if a.Kind == "signature" {
			return true
		}
	}
	return false
}

// bytesReader reads b.
func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
