package assemble

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/internal/registry"
)

// The manifest and config of a base given by digest are kept on disk next
// to the base indexes (ResolveBaseCached), so that
// a later build on that base, in a fresh process, reads neither from the
// registry: what a digest names never changes, and both are checked
// against it when read. Its layers stay in the registry, read (or
// mounted) only when needed. Only a single-platform image manifest is
// kept (a digest of an index is resolved in the registry each time).

func baseCacheFile(dir string, d v1.Hash, what string) string {
	return filepath.Join(dir, d.Algorithm+"-"+d.Hex+"."+what)
}

// cachedBase returns the base image ref (a digest reference) from the
// disk cache, or nil when it is not there or fails its checks.
func cachedBase(ctx context.Context, reg *registry.Options, ref name.Digest, dir string) v1.Image {
	d, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return nil
	}
	raw, err := os.ReadFile(baseCacheFile(dir, d, "manifest"))
	if err != nil {
		return nil
	}
	if h, _, err := v1.SHA256(bytes.NewReader(raw)); err != nil || h != d {
		return nil
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil || !m.MediaType.IsImage() {
		return nil
	}
	cfg, err := os.ReadFile(baseCacheFile(dir, d, "config"))
	if err != nil {
		return nil
	}
	if h, _, err := v1.SHA256(bytes.NewReader(cfg)); err != nil || h != m.Config.Digest {
		return nil
	}
	puller, err := remote.NewPuller(reg.RemoteOptions(ctx)...)
	if err != nil {
		return nil
	}
	core := &cachedCore{ctx: ctx, ref: ref, raw: raw, m: m, cfg: cfg, puller: puller}
	img, err := partial.CompressedToImage(core)
	if err != nil {
		return nil
	}
	return &mountable{Image: img, ref: ref}
}

// keepBase writes img's manifest and config (the image digest d names) to
// dir; a failure only means the next build asks the
// registry.
func keepBase(img v1.Image, d v1.Hash, dir string) {
	raw, err := img.RawManifest()
	if err != nil {
		return
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	_ = writeAtomic(baseCacheFile(dir, d, "config"), cfg)
	_ = writeAtomic(baseCacheFile(dir, d, "manifest"), raw)
}

// writeAtomic writes data to path under a temporary name first.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// cachedCore is a base whose manifest and config come from the disk
// cache; its layers are read from the registry when asked for.
type cachedCore struct {
	ctx    context.Context
	ref    name.Digest
	raw    []byte
	m      *v1.Manifest
	cfg    []byte
	puller *remote.Puller
}

func (c *cachedCore) RawConfigFile() ([]byte, error)      { return c.cfg, nil }
func (c *cachedCore) MediaType() (types.MediaType, error) { return c.m.MediaType, nil }
func (c *cachedCore) RawManifest() ([]byte, error)        { return c.raw, nil }

func (c *cachedCore) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, l := range c.m.Layers {
		if l.Digest == h {
			return &lazyLayer{c: c, desc: l}, nil
		}
	}
	return nil, fmt.Errorf("base %s: no layer %s", c.ref, h)
}

// lazyLayer is a base layer read from the registry only when its content
// is asked for.
type lazyLayer struct {
	c    *cachedCore
	desc v1.Descriptor
}

func (l *lazyLayer) Digest() (v1.Hash, error)            { return l.desc.Digest, nil }
func (l *lazyLayer) Size() (int64, error)                { return l.desc.Size, nil }
func (l *lazyLayer) MediaType() (types.MediaType, error) { return l.desc.MediaType, nil }

func (l *lazyLayer) Compressed() (io.ReadCloser, error) {
	rl, err := l.c.puller.Layer(l.c.ctx, l.c.ref.Context().Digest(l.desc.Digest.String()))
	if err != nil {
		return nil, err
	}
	return rl.Compressed()
}

// mountable gives the layers of a cached base as remote layers of its
// repository, as a base read from the registry has: the publisher mounts
// them from there, or knows them there.
type mountable struct {
	v1.Image
	ref name.Digest
}

func (m *mountable) Layers() ([]v1.Layer, error) {
	ls, err := m.Image.Layers()
	if err != nil {
		return nil, err
	}
	for i, l := range ls {
		ls[i] = &remote.MountableLayer{Layer: l, Reference: m.ref}
	}
	return ls, nil
}

func (m *mountable) LayerByDigest(h v1.Hash) (v1.Layer, error) {
	l, err := m.Image.LayerByDigest(h)
	if err != nil {
		return nil, err
	}
	return &remote.MountableLayer{Layer: l, Reference: m.ref}, nil
}
