package diff

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/render"
)

// Labels an image side reads besides oslayer's own.
const (
	labelOSVersion  = "org.opencontainers.image.version"
	labelVersion    = "version"
	labelKernel     = "ostree.linux"
	labelPackageKey = assemble.LabelPrefix + "package-key"
)

// maxManifest bounds the ownership manifest read from a metadata layer;
// maxLayer an oslayer layer diff reads (each is verified against its
// digest, whole, before it is read).
const (
	maxManifest = 64 << 20
	maxLayer    = 4 << 30
)

// LoadImage reads an oslayer image side: its manifest, its config and its
// metadata layer (the ownership manifest), never a base layer. platform
// nil is linux/amd64.
func LoadImage(ctx context.Context, reg *registry.Options, ref string, platform *v1.Platform) (*Side, error) {
	img, res, err := reg.Image(ctx, ref, platform)
	if err != nil {
		return nil, err
	}
	return imageSide(ref, img, res.Digest.String())
}

// imageSide reads the side of img (resolved from ref, at digest).
func imageSide(ref string, img v1.Image, digest string) (*Side, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", ref, err)
	}
	l := cf.Config.Labels
	if l[assemble.LabelPool] == "" {
		return nil, fmt.Errorf("image %s: not an oslayer pool image (no label %s)", ref, assemble.LabelPool)
	}
	s := &Side{Given: ref, Kind: "image", Digest: digest, Pool: l[assemble.LabelPool], Arch: cf.Architecture,
		BaseDigest: l[assemble.LabelBaseDigest], OSVersion: firstNonEmpty(l[labelOSVersion], l[labelVersion]),
		Kernel: l[labelKernel], PackageKey: l[labelPackageKey], InputsDigest: l[assemble.LabelInputsDigest]}
	if err := json.Unmarshal([]byte(l[assemble.LabelKernelArgs]), &s.KernelArgs); err != nil {
		return nil, fmt.Errorf("image %s: label %s: %w", ref, assemble.LabelKernelArgs, err)
	}
	if s.Layers, err = imageLayers(img, cf); err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	if s.Items, err = ownershipManifest(img, s.Layers); err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	s.open = imageOpener(img, s.Layers)
	return s, nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// imageLayers lists the image's layers; oslayer's are the last ones, named
// by the history comments "oslayer layer NAME" in order.
func imageLayers(img v1.Image, cf *v1.ConfigFile) ([]Layer, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	var roles []string
	for _, h := range cf.History {
		if r, ok := strings.CutPrefix(h.Comment, assemble.HistoryCommentPrefix); ok {
			roles = append(roles, r)
		}
	}
	if len(roles) > len(m.Layers) {
		return nil, fmt.Errorf("history names %d oslayer layers, the manifest has %d layers", len(roles), len(m.Layers))
	}
	out := make([]Layer, len(m.Layers))
	first := len(m.Layers) - len(roles)
	for i, d := range m.Layers {
		out[i] = Layer{Digest: d.Digest.String(), Size: d.Size, Role: "base"}
		if i >= first {
			out[i].Role = roles[i-first]
		}
	}
	return out, nil
}

// ownershipManifest reads render.ManifestPath from the metadata layer.
func ownershipManifest(img v1.Image, layers []Layer) ([]render.ManifestItem, error) {
	var meta *Layer
	for i := range layers {
		if layers[i].Role == render.LayerMetadata {
			meta = &layers[i]
		}
	}
	if meta == nil {
		return nil, nil // nothing rendered: no manifest
	}
	h, err := v1.NewHash(meta.Digest)
	if err != nil {
		return nil, err
	}
	l, err := img.LayerByDigest(h)
	if err != nil {
		return nil, fmt.Errorf("metadata layer %s: %w", meta.Digest, err)
	}
	rc, err := registry.ReadLayer(l, maxLayer)
	if err != nil {
		return nil, fmt.Errorf("metadata layer %s: %w", meta.Digest, err)
	}
	defer rc.Close()
	data, err := findInTar(rc, strings.TrimPrefix(render.ManifestPath, "/"))
	if err != nil {
		return nil, fmt.Errorf("metadata layer %s: %w", meta.Digest, err)
	}
	var man render.Manifest
	if err := json.Unmarshal(data, &man); err != nil {
		return nil, fmt.Errorf("%s: %w", render.ManifestPath, err)
	}
	return man.Items, nil
}

// findInTar returns the content of the regular file name in a tar stream.
func findInTar(r io.Reader, name string) ([]byte, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no %s", name)
		}
		if err != nil {
			return nil, err
		}
		if strings.TrimPrefix(h.Name, "./") != name || h.Typeflag != tar.TypeReg {
			continue
		}
		if h.Size > maxManifest {
			return nil, fmt.Errorf("%s: %d bytes, over %d", name, h.Size, maxManifest)
		}
		return io.ReadAll(io.LimitReader(tr, maxManifest))
	}
}
