package prune

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The annotations of an OCI layout's index.json entries (publish writes
// them as `cosign save` does).
const (
	annRefName   = "org.opencontainers.image.ref.name"
	annKind      = "kind"
	kindSigs     = "dev.cosignproject.cosign/sigs"
	kindAtts     = "dev.cosignproject.cosign/atts"
	kindImage    = "dev.cosignproject.cosign/image"
	maxManifest  = 4 << 20
	layoutPrefix = "oci:"
)

// manifestDoc is what prune reads of a manifest or index blob.
type manifestDoc struct {
	MediaType types.MediaType `json:"mediaType"`
	Config    *v1.Descriptor  `json:"config"`
	Layers    []v1.Descriptor `json:"layers"`
	Manifests []v1.Descriptor `json:"manifests"`
}

// blobFile is the path of blob h in dir.
func blobFile(dir string, h v1.Hash) string { return filepath.Join(dir, "blobs", h.Algorithm, h.Hex) }

// readManifest reads blob h as a manifest or index; ok is false for any
// other blob.
func readManifest(dir string, h v1.Hash) (manifestDoc, bool) {
	var m manifestDoc
	st, err := os.Stat(blobFile(dir, h))
	if err != nil || st.Size() > maxManifest {
		return m, false
	}
	b, err := os.ReadFile(blobFile(dir, h))
	if err != nil || json.Unmarshal(b, &m) != nil {
		return m, false
	}
	return m, m.Config != nil || m.Manifests != nil
}

// layoutIndex reads index.json's entries.
func layoutIndex(dir string) ([]v1.Descriptor, error) {
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("OCI layout %s: index.json: %v", dir, err)
	}
	return idx.Manifests, nil
}

// listLayout returns the images of an OCI layout: its index.json entries
// (tags) and the manifests among its blobs no entry names any more (the
// images a moved tag left), each dated by its manifest blob's write time.
func listLayout(dir string) ([]*Image, error) {
	entries, err := layoutIndex(dir)
	if err != nil {
		return nil, err
	}
	found := map[v1.Hash]*Image{}
	get := func(d v1.Hash) *Image {
		if found[d] == nil {
			found[d] = &Image{Repo: layoutPrefix + dir, Digest: d}
		}
		return found[d]
	}
	var signed *Image
	var attached []Attachment
	for _, e := range entries {
		switch e.Annotations[annKind] {
		case kindSigs:
			attached = append(attached, Attachment{Digest: e.Digest.String(), Kind: "signature"})
			continue
		case kindAtts:
			attached = append(attached, Attachment{Digest: e.Digest.String(), Kind: "attestation"})
			continue
		}
		im := get(e.Digest)
		if t := e.Annotations[annRefName]; t != "" {
			im.Tags = append(im.Tags, t)
		}
		if e.Annotations[annKind] == kindImage {
			signed = im
		}
	}
	if signed != nil {
		signed.Attached = attached
	}
	if err := orphans(dir, get); err != nil {
		return nil, err
	}
	for _, im := range found {
		describeLayout(dir, im, get)
	}
	out := make([]*Image, 0, len(found))
	for _, im := range found {
		out = append(out, im)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Digest.String() < out[j].Digest.String() })
	return out, nil
}

// orphans adds the oslayer images among dir's blobs that no entry names.
func orphans(dir string, get func(v1.Hash) *Image) error {
	files, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	for _, f := range files {
		h := v1.Hash{Algorithm: "sha256", Hex: f.Name()}
		m, ok := readManifest(dir, h)
		if !ok {
			continue
		}
		if len(m.Manifests) > 0 {
			// An index: ours when its first platform image is.
			if c, ok := readManifest(dir, m.Manifests[0].Digest); ok && c.Config != nil {
				m = c
			}
		}
		if m.Config != nil && configLabels(dir, m)[labelPool] != "" {
			get(h)
		}
	}
	return nil
}

// configLabels reads an image manifest's config labels.
func configLabels(dir string, m manifestDoc) map[string]string {
	b, err := os.ReadFile(blobFile(dir, m.Config.Digest))
	if err != nil {
		return nil
	}
	var cf v1.ConfigFile
	if json.Unmarshal(b, &cf) != nil {
		return nil
	}
	return cf.Config.Labels
}

// describeLayout fills an image's labels, platforms and write time.
func describeLayout(dir string, im *Image, get func(v1.Hash) *Image) {
	m, ok := readManifest(dir, im.Digest)
	if !ok {
		im.Gone = true
		return
	}
	im.Media = m.MediaType
	if st, err := os.Stat(blobFile(dir, im.Digest)); err == nil {
		im.Time, im.TimeFrom = st.ModTime().UTC(), "layout: manifest written"
	}
	if m.Config != nil {
		l := configLabels(dir, m)
		im.Pool, im.BaseDigest = l[labelPool], l[labelBaseDigest]
	}
	for _, c := range m.Manifests {
		im.Platforms = append(im.Platforms, c.Digest)
		if found := get(c.Digest); found.Index == nil {
			d := im.Digest
			found.Index = &d
			describeLayout(dir, found, get)
		}
	}
}
