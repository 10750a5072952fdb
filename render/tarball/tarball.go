// Package tarball writes a tree.Tree as a deterministic tar stream and a
// deterministic gzip layer.
//
// Determinism rules (the same tree gives the same bytes on any machine):
//
//   - entries in tree order: sorted component by component, parents before
//     children, hard links last;
//   - names are relative ("etc/x"), directories end in "/";
//   - a tree.Whiteout is an empty regular file DIR/.wh.NAME (mode 0,
//     root-owned), the OCI whiteout of DIR/NAME;
//   - every mtime is the given epoch truncated to seconds; no atime, ctime,
//     user or group names; uid/gid as given (0 by default);
//   - USTAR headers, PAX records only where USTAR cannot hold a value (long or
//     non-ASCII names, large ids); archive/tar derives them only from the
//     header fields set here, never from the host;
//   - gzip from the pinned github.com/klauspost/compress/gzip (not the
//     toolchain's compress/gzip, whose output changed between Go releases) at
//     the fixed level Level, with an empty gzip header (no name, mtime 0).
package tarball

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/render/tree"
)

// Level is the fixed gzip level. Changing it changes every layer digest.
const Level = 6

// WhiteoutPrefix marks an OCI whiteout file: DIR/.wh.NAME removes DIR/NAME
// of the layers below.
const WhiteoutPrefix = ".wh."

// Name is the tar entry name of a tree path: no leading slash, directories
// with a trailing slash, a whiteout as DIR/.wh.NAME.
func Name(e *tree.Entry) string {
	n := strings.TrimPrefix(e.Path, "/")
	switch e.Kind {
	case tree.Dir:
		n += "/"
	case tree.Whiteout:
		dir, base := path.Split(n)
		n = dir + WhiteoutPrefix + base
	}
	return n
}

// Header is the tar header of e with mtime epoch.
func Header(e *tree.Entry, epoch time.Time) (*tar.Header, error) {
	h := &tar.Header{
		Name:    Name(e),
		Mode:    int64(e.Mode & tree.MaxModeBits),
		Uid:     e.UID,
		Gid:     e.GID,
		ModTime: epoch.UTC().Truncate(time.Second),
	}
	switch e.Kind {
	case tree.File:
		h.Typeflag = tar.TypeReg
		h.Size = int64(len(e.Data))
	case tree.Dir:
		h.Typeflag = tar.TypeDir
	case tree.Symlink:
		h.Typeflag = tar.TypeSymlink
		h.Linkname = e.Target
	case tree.Hardlink:
		h.Typeflag = tar.TypeLink
		h.Linkname = strings.TrimPrefix(e.Target, "/")
	case tree.Whiteout:
		// An empty regular file, as the OCI image spec describes it.
		h.Typeflag = tar.TypeReg
	default:
		return nil, fmt.Errorf("%s: unsupported entry type %v", e.Path, e.Kind)
	}
	return h, nil
}

// Write writes t to w as an uncompressed tar stream with every mtime set to
// epoch.
func Write(w io.Writer, t *tree.Tree, epoch time.Time) error {
	tw := tar.NewWriter(w)
	for _, e := range t.Entries() {
		h, err := Header(e, epoch)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("tar %s: %w", e.Path, err)
		}
		if e.Kind == tree.File && len(e.Data) > 0 {
			if _, err := tw.Write(e.Data); err != nil {
				return fmt.Errorf("tar %s: %w", e.Path, err)
			}
		}
	}
	return tw.Close()
}

// Layer is a compressed layer with its digests.
type Layer struct {
	// Gzip is the compressed tar.
	Gzip []byte
	// Digest is sha256 of Gzip; DiffID is sha256 of the uncompressed tar.
	Digest v1.Hash
	DiffID v1.Hash
	// TarSize is the uncompressed size.
	TarSize int64
}

type countingHash struct {
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

type buffer struct{ b []byte }

func (b *buffer) Write(p []byte) (int, error) {
	b.b = append(b.b, p...)
	return len(p), nil
}

// maxReserve bounds the output buffer Build reserves up front.
const maxReserve = 2 << 30

// reserve is the most the compressed tar of t can take: the tar's size
// (a header and padded data per entry, the end blocks) plus deflate's
// stored-block overhead. Reserving it once spares the copies of a growing
// buffer, which for incompressible content (binaries from imageRef) would
// hold the layer about twice at its last growth; pages of the reservation
// that compression leaves unused are never touched.
func reserve(t *tree.Tree) int {
	n := int64(2 * 512)
	for _, e := range t.Entries() {
		n += 3*512 + (int64(len(e.Data))+511)/512*512 // header, PAX/long-name headers, data
	}
	n += n/1024 + 64<<10
	return int(min(n, maxReserve))
}

// Build writes t as tar, compresses it and computes both digests in one pass.
func Build(t *tree.Tree, epoch time.Time) (*Layer, error) {
	out := &buffer{b: make([]byte, 0, reserve(t))}
	gzHash := sha256.New()
	zw, err := gzipWriter(io.MultiWriter(out, gzHash))
	if err != nil {
		return nil, err
	}
	defer gzipWriters.Put(zw)
	tarHash := &countingHash{h: sha256.New()}
	if err := Write(io.MultiWriter(zw, tarHash), t, epoch); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if len(out.b) < cap(out.b)/2 {
		// Compressible content: keep only what it took.
		out.b = append([]byte(nil), out.b...)
	}
	return &Layer{
		Gzip:    out.b,
		Digest:  hashOf(gzHash),
		DiffID:  hashOf(tarHash.h),
		TarSize: tarHash.n,
	}, nil
}

// gzipWriters keeps compressors for reuse: a new one allocates and clears
// its tables (about a megabyte), which for the small layers of a pool
// costs more than compressing them.
var gzipWriters sync.Pool

// gzipWriter returns a compressor at Level writing to w, as a new one
// would be (Reset restores every setting).
func gzipWriter(w io.Writer) (*gzip.Writer, error) {
	zw, _ := gzipWriters.Get().(*gzip.Writer)
	if zw == nil {
		var err error
		if zw, err = gzip.NewWriterLevel(w, Level); err != nil {
			return nil, err
		}
	} else {
		zw.Reset(w)
	}
	// No name, no comment, mtime 0 (this gzip writes ModTime.Unix()
	// unconditionally, so set it to the epoch explicitly), OS "unknown".
	zw.ModTime = time.Unix(0, 0)
	return zw, nil
}

func hashOf(h hash.Hash) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
}
