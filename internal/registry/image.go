package registry

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/inputfile"
)

// Resolved says what a reference resolved to.
type Resolved struct {
	// Given is the reference as the user wrote it.
	Given string `json:"given"`
	// Ref is the registry reference after mirror rewriting (nil for layouts).
	Ref name.Reference `json:"-"`
	// LayoutDir and LayoutTag are set for "oci:DIR[:TAG]".
	LayoutDir string `json:"layoutDir,omitempty"`
	LayoutTag string `json:"layoutTag,omitempty"`
	// Digest is the manifest digest of the selected (single-platform) image.
	Digest v1.Hash `json:"digest"`
	// IndexDigest is set when the reference named a multi-platform index.
	IndexDigest *v1.Hash `json:"indexDigest,omitempty"`
	// Pinned is true when the user gave a digest rather than a tag.
	Pinned bool `json:"pinned"`
}

// Digested returns "REG/REPO@sha256:..." (or "oci:DIR@sha256:...").
func (r Resolved) Digested() string {
	if r.Ref == nil {
		return LayoutPrefix + r.LayoutDir + "@" + r.Digest.String()
	}
	return r.Ref.Context().Digest(r.Digest.String()).String()
}

// NormalizeArch maps the kernel's architecture names (uname -m, RPM) to
// the OCI/Go names: x86_64 → amd64, aarch64 → arm64; others are returned
// as they are. Every --arch takes either spelling.
func NormalizeArch(a string) string {
	switch a {
	case "x86_64":
		return "amd64"
	case "aarch64":
		return "arm64"
	}
	return a
}

// DefaultPlatform is linux/amd64.
var DefaultPlatform = v1.Platform{OS: "linux", Architecture: "amd64"}

// Image opens ref (a registry reference or "oci:DIR[:TAG]") for the given
// platform (nil: linux/amd64) without downloading any layer blob: only the
// manifest (and index) and the config are read, and layers stay lazy.
func (o *Options) Image(ctx context.Context, ref string, platform *v1.Platform) (v1.Image, Resolved, error) {
	if platform == nil {
		platform = &DefaultPlatform
	}
	if IsLayout(ref) {
		return layoutImage(ref, *platform)
	}
	r, err := o.ParseReference(ref)
	if err != nil {
		return nil, Resolved{}, err
	}
	res := Resolved{Given: ref, Ref: r}
	_, res.Pinned = r.(name.Digest)
	desc, err := remote.Get(r, o.RemoteOptions(ctx)...)
	if err != nil {
		return nil, res, &ImageError{Ref: ref, Err: ExplainRefused(err, r.Context())}
	}
	var img v1.Image
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, res, &ImageError{Ref: ref, Err: err}
		}
		d := desc.Digest
		res.IndexDigest = &d
		img, _, err = pickPlatform(idx, *platform, ref)
		if err != nil {
			return nil, res, err
		}
	} else {
		img, err = desc.Image()
		if err != nil {
			return nil, res, &ImageError{Ref: ref, Err: err}
		}
	}
	if res.Digest, err = img.Digest(); err != nil {
		return nil, res, &ImageError{Ref: ref, Err: err}
	}
	return img, res, nil
}

// layoutImage resolves an "oci:DIR[:TAG|@DIGEST]" reference to the image
// for platform (picked from an index the reference names).
func layoutImage(ref string, platform v1.Platform) (v1.Image, Resolved, error) {
	l, err := ParseLayout(ref)
	if err != nil {
		return nil, Resolved{}, err
	}
	dir := l.Dir
	res := Resolved{Given: ref, LayoutDir: dir, LayoutTag: l.Tag, Pinned: l.Digest != v1.Hash{}}
	idx, im, err := readLayoutIndex(dir)
	if err != nil {
		return nil, res, err
	}
	d, err := layoutEntry(im, l)
	if err != nil {
		return nil, res, err
	}
	var img v1.Image
	if d.MediaType.IsIndex() {
		sub, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, res, fmt.Errorf("OCI layout %s: %w", dir, err)
		}
		raw, err := sub.RawManifest()
		if err == nil {
			err = checkManifest(raw, d.Digest)
		}
		if err != nil {
			return nil, res, fmt.Errorf("OCI layout %s: %w", dir, err)
		}
		dd := d.Digest
		res.IndexDigest = &dd
		var child v1.Hash
		if img, child, err = pickPlatform(sub, platform, ref); err != nil {
			return nil, res, err
		}
		if err = checkImage(img, child); err != nil {
			return nil, res, fmt.Errorf("OCI layout %s: %w", dir, err)
		}
	} else if img, err = idx.Image(d.Digest); err != nil {
		return nil, res, fmt.Errorf("OCI layout %s: %w", dir, err)
	} else if err = checkImage(img, d.Digest); err != nil {
		return nil, res, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if res.Digest, err = img.Digest(); err != nil {
		return nil, res, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return img, res, nil
}

// readLayoutIndex reads the index of the layout in dir, once its files
// are checked: a pipe or device among them would block or stream without
// end when read.
func readLayoutIndex(dir string) (v1.ImageIndex, *v1.IndexManifest, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := inputfile.CheckTree(dir); err != nil {
		return nil, nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return idx, im, nil
}

// layoutEntry is the entry of the layout's index.json that l names: by
// digest, by tag, or the only one.
func layoutEntry(im *v1.IndexManifest, l Layout) (v1.Descriptor, error) {
	pinned := l.Digest != v1.Hash{}
	var matches []v1.Descriptor
	for _, d := range im.Manifests {
		switch {
		case pinned:
			if d.Digest == l.Digest {
				matches = append(matches, d)
			}
		case l.Tag == "" || d.Annotations["org.opencontainers.image.ref.name"] == l.Tag:
			matches = append(matches, d)
		}
	}
	switch {
	case len(matches) == 0 && pinned:
		return v1.Descriptor{}, fmt.Errorf("OCI layout %s: no manifest %s in index.json", l.Dir, l.Digest)
	case len(matches) == 0 && l.Tag != "":
		return v1.Descriptor{}, fmt.Errorf("OCI layout %s: no image tagged %q", l.Dir, l.Tag)
	case len(matches) == 0:
		return v1.Descriptor{}, fmt.Errorf("OCI layout %s: no image in index.json", l.Dir)
	case len(matches) > 1 && l.Tag == "" && !pinned:
		return v1.Descriptor{}, fmt.Errorf("OCI layout %s holds %d images: name one with oci:%s:TAG", l.Dir, len(matches), l.Dir)
	}
	return matches[0], nil
}

// ImageError is an image that could not be opened: "image REF: ERR".
// Ref is the reference as given, so that a caller that names the image
// itself (the build's "base REF: ") can say Err under its own name.
type ImageError struct {
	Ref string
	Err error
}

func (e *ImageError) Error() string { return "image " + e.Ref + ": " + e.Err.Error() }
func (e *ImageError) Unwrap() error { return e.Err }

// ErrNoPlatform is returned when an index has no image for the platform.
var ErrNoPlatform = errors.New("no image for platform")

// ErrNotIndex is returned by Platforms for a reference that names one
// image, not a multi-platform index.
var ErrNotIndex = errors.New("not a multi-platform index")

func pickPlatform(idx v1.ImageIndex, want v1.Platform, ref string) (v1.Image, v1.Hash, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, v1.Hash{}, &ImageError{Ref: ref, Err: err}
	}
	var have []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			continue
		}
		have = append(have, d.Platform.String())
		if d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture &&
			(want.Variant == "" || d.Platform.Variant == want.Variant) {
			img, err := idx.Image(d.Digest)
			return img, d.Digest, err
		}
	}
	return nil, v1.Hash{}, &ImageError{Ref: ref, Err: fmt.Errorf("%w %s (index has %v)", ErrNoPlatform, want.String(), have)}
}

// Platforms lists the platforms of ref's index (a registry reference or
// "oci:DIR[:TAG]"), in index order, without reading any image. A reference
// to a single image is an error naming it: it has no platforms to choose
// from.
func (o *Options) Platforms(ctx context.Context, ref string) ([]v1.Platform, error) {
	var idx v1.ImageIndex
	var err error
	if IsLayout(ref) {
		idx, err = layoutIndex(ref)
	} else {
		idx, err = o.remoteIndex(ctx, ref)
	}
	if err != nil {
		return nil, err
	}
	return platformsOf(idx, ref)
}

// layoutIndex is the multi-platform index an "oci:DIR[:TAG|@DIGEST]"
// reference names.
func layoutIndex(ref string) (v1.ImageIndex, error) {
	l, err := ParseLayout(ref)
	if err != nil {
		return nil, err
	}
	p, err := layout.FromPath(l.Dir)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", l.Dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", l.Dir, err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", l.Dir, err)
	}
	for _, d := range im.Manifests {
		match := d.Annotations["org.opencontainers.image.ref.name"] == l.Tag || l.Tag == ""
		if l.Digest != (v1.Hash{}) {
			match = d.Digest == l.Digest
		}
		if !match || !d.MediaType.IsIndex() {
			continue
		}
		idx, err := top.ImageIndex(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("OCI layout %s: %w", l.Dir, err)
		}
		return idx, nil
	}
	return nil, fmt.Errorf("image %s: %w", ref, ErrNotIndex)
}

// remoteIndex is the multi-platform index a registry reference names.
func (o *Options) remoteIndex(ctx context.Context, ref string) (v1.ImageIndex, error) {
	r, err := o.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	desc, err := remote.Get(r, o.RemoteOptions(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	if !desc.MediaType.IsIndex() {
		return nil, fmt.Errorf("image %s: %w (it is one %s image)", ref, ErrNotIndex, desc.MediaType)
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	return idx, nil
}

// platformsOf lists the platforms of index idx (of ref), in order.
func platformsOf(idx v1.ImageIndex, ref string) ([]v1.Platform, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	var ps []v1.Platform
	for _, d := range im.Manifests {
		// Attestation manifests (buildkit's "unknown/unknown") are not
		// platforms.
		if d.Platform == nil || d.Platform.OS == "unknown" || d.MediaType.IsIndex() {
			continue
		}
		ps = append(ps, *d.Platform)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("image %s: the index names no platform", ref)
	}
	return ps, nil
}
