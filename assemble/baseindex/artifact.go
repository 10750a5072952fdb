package baseindex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The OCI artifact that carries an index in a registry.
const (
	// TagSuffix ends the tag: "sha256-<hex>.baseindex", next to cosign's
	// ".sig" and ".att" of the same digest.
	TagSuffix = ".baseindex"
	// MediaType is the artifact's one layer: Marshal's bytes.
	MediaType types.MediaType = "application/vnd.oslayer.baseindex.v1+json+gzip"
	// ArtifactType is the manifest's artifactType.
	ArtifactType = "application/vnd.oslayer.baseindex.v1"
	// AnnotationBase and AnnotationDigest on the manifest record the base
	// manifest digest and the index's own digest.
	AnnotationBase   = "io.oslayer.baseindex.base"
	AnnotationDigest = "io.oslayer.baseindex.digest"
)

// maxArtifact bounds the layer read from a registry (256 MiB).
const maxArtifact = 256 << 20

// Tag returns the artifact tag of base: "sha256-<hex>.baseindex".
func Tag(base v1.Hash) string { return base.Algorithm + "-" + base.Hex + TagSuffix }

// Artifact returns ix as an OCI image manifest (artifactType ArtifactType,
// one layer of MediaType, annotations AnnotationBase and AnnotationDigest).
// The same index always gives the same manifest digest.
func Artifact(ix *Index) (v1.Image, error) {
	data, err := ix.Marshal()
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(data, MediaType), MediaType: MediaType})
	if err != nil {
		return nil, err
	}
	return &artifact{Image: mutate.Annotations(img, map[string]string{
		AnnotationBase:   ix.Base.String(),
		AnnotationDigest: ix.Digest,
	}).(v1.Image)}, nil
}

// artifact adds artifactType to the manifest.
type artifact struct{ v1.Image }

func (a *artifact) Manifest() (*v1.Manifest, error) {
	m, err := a.Image.Manifest()
	if err != nil {
		return nil, err
	}
	m = m.DeepCopy()
	m.ArtifactType = ArtifactType
	return m, nil
}

func (a *artifact) RawManifest() ([]byte, error) {
	m, err := a.Manifest()
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

func (a *artifact) Digest() (v1.Hash, error) {
	raw, err := a.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	return h, err
}

func (a *artifact) Size() (int64, error) {
	raw, err := a.RawManifest()
	return int64(len(raw)), err
}

// Publish writes ix to repo under Tag(ix.Base), unless the tag already holds
// its artifact: the artifact of an index is always the same manifest, so
// the write's look at the tag (a HEAD) is the only request then.
func Publish(ctx context.Context, repo name.Repository, ix *Index, opts ...remote.Option) error {
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	tag := repo.Tag(Tag(ix.Base))
	img, err := Artifact(ix)
	if err != nil {
		return err
	}
	if err := remote.Write(tag, img, opts...); err != nil {
		return fmt.Errorf("base index artifact %s: %w", tag, err)
	}
	return nil
}

// Fetch reads the index of base from repo (tag Tag(base)). It returns
// (nil, nil) when the repository has none. An artifact whose recorded base
// or own digest does not match is an error (the caller rebuilds).
func Fetch(ctx context.Context, repo name.Repository, base v1.Hash, opts ...remote.Option) (*Index, error) {
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	tag := repo.Tag(Tag(base))
	img, err := remote.Image(tag, opts...)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("base index artifact %s: %w", tag, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("base index artifact %s: %w", tag, err)
	}
	if got := m.Annotations[AnnotationBase]; got != base.String() {
		return nil, fmt.Errorf("base index artifact %s: annotation %s is %q, want %s", tag, AnnotationBase, got, base)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != MediaType {
		return nil, fmt.Errorf("base index artifact %s: want one layer of %s", tag, MediaType)
	}
	if m.Layers[0].Size > maxArtifact {
		return nil, fmt.Errorf("base index artifact %s: layer of %d bytes, more than %d", tag, m.Layers[0].Size, maxArtifact)
	}
	l, err := img.LayerByDigest(m.Layers[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("base index artifact %s: %w", tag, err)
	}
	rc, err := l.Compressed() // verified against the descriptor's digest at EOF
	if err != nil {
		return nil, fmt.Errorf("base index artifact %s: %w", tag, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxArtifact+1))
	if err != nil {
		return nil, fmt.Errorf("base index artifact %s: %w", tag, err)
	}
	ix, err := Unmarshal(data, base)
	if err != nil {
		return nil, fmt.Errorf("base index artifact %s: %w", tag, err)
	}
	if got := m.Annotations[AnnotationDigest]; got != ix.Digest {
		return nil, fmt.Errorf("base index artifact %s: annotation %s is %q, the index's digest is %s", tag, AnnotationDigest, got, ix.Digest)
	}
	return ix, nil
}

// denied reports an authentication or authorization refusal.
func denied(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden)
}

// notFound reports a missing tag or repository.
func notFound(err error) bool {
	var te *transport.Error
	if errors.As(err, &te) {
		if te.StatusCode == http.StatusNotFound {
			return true
		}
		for _, d := range te.Errors {
			if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
				return true
			}
		}
	}
	return false
}
