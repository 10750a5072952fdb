package record

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/internal/registry"
)

// Write writes r for the image r.Image in repo under Tag (replacing an
// earlier build's record of the same image): one manifest PUT whose
// config is config, a blob the repository holds (the image's config). A
// zero config uploads and names EmptyConfig. It returns the manifest's
// descriptor.
func Write(ctx context.Context, reg *registry.Options, repo name.Repository, r Record, config v1.Descriptor) (v1.Descriptor, error) {
	ro := reg.RemoteOptions(ctx)
	tag := Tag(repo, r.Image)
	if config.Digest.Hex == "" {
		config = EmptyConfig
		if err := remote.WriteLayer(repo, static.NewLayer([]byte("{}"), EmptyConfig.MediaType), ro...); err != nil {
			return v1.Descriptor{}, fmt.Errorf("build record %s: %w", tag, err)
		}
	}
	mf, err := Encode(r, config)
	if err != nil {
		return v1.Descriptor{}, err
	}
	if err := remote.Put(tag, raw(mf), ro...); err != nil {
		return v1.Descriptor{}, fmt.Errorf("build record %s: %w", tag, err)
	}
	h, size, err := v1.SHA256(bytesReader(mf))
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: types.OCIManifestSchema1, ArtifactType: ArtifactType, Digest: h, Size: size}, nil
}

// Read returns the record of image d in repo and its manifest digest;
// (nil, zero, nil) when the image has none.
func Read(ctx context.Context, reg *registry.Options, repo name.Repository, d v1.Hash) (*Record, v1.Hash, error) {
	desc, err := remote.Get(Tag(repo, d), reg.RemoteOptions(ctx)...)
	if registry.IsStatus(err, http.StatusNotFound) {
		return nil, v1.Hash{}, nil
	}
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("read %s: %w", Tag(repo, d), err)
	}
	r, err := Parse(desc.Manifest)
	if err != nil {
		return nil, desc.Digest, fmt.Errorf("%s: %w", Tag(repo, d), err)
	}
	if r.Image != d {
		return nil, desc.Digest, fmt.Errorf("%s: the record is of %s", Tag(repo, d), r.Image)
	}
	return r, desc.Digest, nil
}

// raw is a manifest to put as it is.
type raw []byte

func (r raw) RawManifest() ([]byte, error)        { return r, nil }
func (r raw) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
