package assemble

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/render"
)

// bytesLayer is a v1.Layer over the exact gzip bytes of a rendered layer.
// It never recompresses: Compressed returns the bytes as rendered, so the
// digest recorded by the renderer is the digest pushed.
type bytesLayer struct {
	gz     []byte
	digest v1.Hash
	diffID v1.Hash
	mt     types.MediaType
}

var _ v1.Layer = (*bytesLayer)(nil)

// newBytesLayer checks the precomputed digest, size and diffID of l against
// its bytes and wraps them.
func newBytesLayer(l render.Layer, mt types.MediaType) (*bytesLayer, error) {
	if len(l.Gzip) == 0 {
		return nil, fmt.Errorf("layer %q: no content", l.Name)
	}
	if l.Size != int64(len(l.Gzip)) {
		return nil, fmt.Errorf("layer %q: size %d does not match its %d bytes", l.Name, l.Size, len(l.Gzip))
	}
	sum := sha256.Sum256(l.Gzip)
	d := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
	if l.Digest != d {
		return nil, fmt.Errorf("layer %q: digest %s does not match its bytes (%s)", l.Name, l.Digest, d)
	}
	zr, err := gzip.NewReader(bytes.NewReader(l.Gzip))
	if err != nil {
		return nil, fmt.Errorf("layer %q: not gzip: %w", l.Name, err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, zr); err != nil {
		return nil, fmt.Errorf("layer %q: gzip: %w", l.Name, err)
	}
	diffID := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
	if l.DiffID != diffID {
		return nil, fmt.Errorf("layer %q: diffID %s does not match its content (%s)", l.Name, l.DiffID, diffID)
	}
	return &bytesLayer{gz: l.Gzip, digest: d, diffID: diffID, mt: mt}, nil
}

func (l *bytesLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *bytesLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *bytesLayer) Size() (int64, error)                { return int64(len(l.gz)), nil }
func (l *bytesLayer) MediaType() (types.MediaType, error) { return l.mt, nil }
func (l *bytesLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.gz)), nil
}
func (l *bytesLayer) Uncompressed() (io.ReadCloser, error) {
	zr, err := gzip.NewReader(bytes.NewReader(l.gz))
	if err != nil {
		return nil, err
	}
	return zr, nil
}

// retypedLayer presents a base layer under another (equivalent) media type,
// e.g. a Docker gzip layer as an OCI gzip layer. The blob is the same; only
// the descriptor changes.
type retypedLayer struct {
	v1.Layer
	desc v1.Descriptor
}

func (l *retypedLayer) MediaType() (types.MediaType, error) { return l.desc.MediaType, nil }

// Descriptor returns the descriptor as it appears in the new manifest.
func (l *retypedLayer) Descriptor() (*v1.Descriptor, error) {
	d := l.desc
	return &d, nil
}

// retype wraps l with the descriptor desc, keeping a cross-repository mount
// hint when l came from a registry.
func retype(l v1.Layer, desc v1.Descriptor) v1.Layer {
	if ml, ok := l.(*remote.MountableLayer); ok {
		return &remote.MountableLayer{Layer: &retypedLayer{Layer: ml.Layer, desc: desc}, Reference: ml.Reference}
	}
	return &retypedLayer{Layer: l, desc: desc}
}
