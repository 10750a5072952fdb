package sign

import (
	"archive/tar"
	"crypto/sha1" //nolint:gosec // SPDX 2.3 requires a SHA1 checksum of every file
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/render"
)

// SBOMPredicateType is the predicate type of the SPDX JSON SBOM
// attestation (cosign's "spdxjson").
const SBOMPredicateType = "https://spdx.dev/Document"

// SPDX is an SPDX 2.3 JSON document: the files oslayer added to an image.
type SPDX struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      SPDXCreationInfo   `json:"creationInfo"`
	Packages          []SPDXPackage      `json:"packages"`
	Files             []SPDXFile         `json:"files"`
	Relationships     []SPDXRelationship `json:"relationships"`
}

// SPDXCreationInfo says who made the document and when.
type SPDXCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

// SPDXPackage is the pool image's added content as one package.
type SPDXPackage struct {
	SPDXID           string `json:"SPDXID"`
	Name             string `json:"name"`
	VersionInfo      string `json:"versionInfo,omitempty"`
	DownloadLocation string `json:"downloadLocation"`
	FilesAnalyzed    bool   `json:"filesAnalyzed"`
	Supplier         string `json:"supplier,omitempty"`
	Comment          string `json:"comment,omitempty"`
}

// SPDXFile is one regular file oslayer placed. Comment names the input
// document, object and field it came from, the layer and the mode.
type SPDXFile struct {
	SPDXID           string         `json:"SPDXID"`
	FileName         string         `json:"fileName"`
	Checksums        []SPDXChecksum `json:"checksums"`
	LicenseConcluded string         `json:"licenseConcluded"`
	CopyrightText    string         `json:"copyrightText"`
	Comment          string         `json:"comment,omitempty"`
}

// SPDXChecksum is a file digest.
type SPDXChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

// SPDXRelationship relates two elements.
type SPDXRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// SBOMStatement is an in-toto v1 statement with an SPDX predicate.
type SBOMStatement struct {
	Type          string               `json:"_type"`
	Subject       []ResourceDescriptor `json:"subject"`
	PredicateType string               `json:"predicateType"`
	Predicate     *SPDX                `json:"predicate"`
}

// NewSBOM describes the regular files oslayer added to b (published at
// d): every file of the ownership manifest with its SHA256 (from the
// manifest) and SHA1 (read from the added layer, which must match the
// manifest's SHA256), and the document, object and field it came from.
// It has no wall-clock time: the image's epoch is its creation time.
func NewSBOM(b *assemble.Built, d name.Digest, version string) (*SBOMStatement, error) {
	if b == nil {
		return nil, errors.New("sbom: no build")
	}
	sums, err := addedFileSums(b)
	if err != nil {
		return nil, fmt.Errorf("sbom: %w", err)
	}
	hexd := strings.TrimPrefix(d.DigestStr(), "sha256:")
	created := "2000-01-01T00:00:00Z"
	if b.Image != nil {
		if cf, err := b.Image.ConfigFile(); err == nil && !cf.Created.IsZero() {
			created = cf.Created.UTC().Format("2006-01-02T15:04:05Z")
		}
	}
	pkg := SPDXPackage{
		SPDXID: "SPDXRef-Package-pool", Name: "oslayer pool " + b.Pool, VersionInfo: b.InputsDigest,
		DownloadLocation: "NOASSERTION", Supplier: "Organization: oslayer",
		Comment: "the files oslayer added on top of the base " + baseURI(relRef(b.Base.Ref), b.Base.Digest.String()),
	}
	doc := &SPDX{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              "oslayer pool " + b.Pool + " " + d.DigestStr(),
		DocumentNamespace: BuilderID + "/spdx/" + b.Pool + "/" + hexd,
		CreationInfo:      SPDXCreationInfo{Created: created, Creators: []string{"Tool: oslayer-" + version}},
		Packages:          []SPDXPackage{pkg},
		Files:             []SPDXFile{},
		Relationships:     []SPDXRelationship{{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: pkg.SPDXID}},
	}
	root := inputRoot(b.Inputs)
	for _, f := range b.Files {
		if f.Type != "file" {
			continue
		}
		at := imagePath(f.Path)
		if f.StoredAt != "" {
			at = imagePath(f.StoredAt)
		}
		s, ok := sums[at]
		if !ok {
			return nil, fmt.Errorf("sbom: %s (%s) is in the ownership manifest but in no added layer", f.Path, f.Source)
		}
		if s.sha256 != strings.TrimPrefix(f.SHA256, "sha256:") {
			return nil, fmt.Errorf("sbom: %s: the added layer holds sha256:%s, the ownership manifest says %s", f.Path, s.sha256, f.SHA256)
		}
		id := fmt.Sprintf("SPDXRef-File-%d", len(doc.Files)+1)
		doc.Files = append(doc.Files, SPDXFile{
			SPDXID: id, FileName: "." + f.Path,
			Checksums:        []SPDXChecksum{{Algorithm: "SHA1", ChecksumValue: s.sha1}, {Algorithm: "SHA256", ChecksumValue: s.sha256}},
			LicenseConcluded: "NOASSERTION", CopyrightText: "NOASSERTION",
			Comment: fileComment(f, root),
		})
		doc.Relationships = append(doc.Relationships, SPDXRelationship{Element: pkg.SPDXID, Type: "CONTAINS", Related: id})
	}
	return &SBOMStatement{
		Type:          StatementType,
		Subject:       []ResourceDescriptor{{Name: d.Context().Name(), Digest: map[string]string{"sha256": hexd}}},
		PredicateType: SBOMPredicateType,
		Predicate:     doc,
	}, nil
}

// fileComment names where a file came from: "source: DOC (Kind NAME)
// FIELD; layer L; mode M uid U gid G[; stored at P]", DOC named as the
// provenance names inputs (relative to root, inputRoot's).
func fileComment(f render.Baked, root string) string {
	src := f.Source
	src.Document = inputURI(root, src.Document)
	c := fmt.Sprintf("source: %s; layer %s; mode %s uid %d gid %d", src, f.Layer, f.Mode, f.UID, f.GID)
	if f.StoredAt != "" {
		c += "; stored at " + f.StoredAt
	}
	if f.FromImage != "" {
		c += "; from image " + f.FromImage
	}
	return c
}

func imagePath(p string) string { return strings.TrimPrefix(path.Clean("/"+p), "/") }

type fileSums struct{ sha1, sha256 string }

// maxAddedLayer bounds an added layer the SBOM reads.
const maxAddedLayer = 16 << 30

// addedFileSums reads the regular files of b's added layers (later layers
// win) and returns their digests by image path.
func addedFileSums(b *assemble.Built) (map[string]fileSums, error) {
	out := map[string]fileSums{}
	if b.Image == nil {
		return out, nil // nothing to read: the ownership manifest must be empty too
	}
	for _, a := range b.Added {
		l, err := b.Image.LayerByDigest(a.Digest)
		if err != nil {
			return nil, fmt.Errorf("added layer %s: %w", a.Digest, err)
		}
		rc, err := registry.ReadLayer(l, maxAddedLayer) // verified whole before the SBOM reads it
		if err != nil {
			return nil, fmt.Errorf("added layer %s: %w", a.Digest, err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				rc.Close()
				return nil, fmt.Errorf("added layer %s: %w", a.Digest, err)
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			s1, s256 := sha1.New(), sha256.New()
			if _, err := io.Copy(io.MultiWriter(s1, s256), tr); err != nil {
				rc.Close()
				return nil, fmt.Errorf("added layer %s: %s: %w", a.Digest, h.Name, err)
			}
			out[imagePath(h.Name)] = fileSums{sha1: hex.EncodeToString(s1.Sum(nil)), sha256: hex.EncodeToString(s256.Sum(nil))}
		}
		rc.Close()
	}
	return out, nil
}
