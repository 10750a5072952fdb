// Package imagefile reads single files out of container images, for Gardener
// imageRef files. It implements model.ImageFiles with go-containerregistry.
//
// A reference is resolved through registry.Options (mirrors, credentials,
// OCI layouts; linux/amd64 from an index). The layers are read from the top
// down and the search stops at the first entry for the path: a regular file
// (or a hard link to one in the same layer) is returned; a whiteout
// (".wh.NAME" for the path or one of its parents, or an opaque
// ".wh..wh..opq" in a parent directory) above any lower copy means the file
// does not exist. Symbolic links, directories and devices are refused.
//
// Results are cached in memory by image digest and path; resolved references
// are cached by reference string for the Reader's lifetime. A Reader is safe
// for concurrent use.
package imagefile

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/layers/model"
	"github.com/oslayer/oslayer/registry"
)

// ErrNotFound is returned (wrapped) when the image has no such file.
var ErrNotFound = errors.New("file not found in image")

// Option configures a Reader.
type Option func(*Reader)

// WithLogger logs image resolution and layer scans at debug level.
func WithLogger(l *slog.Logger) Option { return func(r *Reader) { r.log = l } }

// WithMaxSize bounds the size of one file read (default
// model.MaxImageFileSize).
func WithMaxSize(n int64) Option { return func(r *Reader) { r.max = n } }

// WithPlatform selects the platform in multi-platform images (default
// linux/amd64).
func WithPlatform(p v1.Platform) Option { return func(r *Reader) { r.platform = &p } }

// Reader reads files from images. It implements model.ImageFiles.
type Reader struct {
	reg      *registry.Options
	log      *slog.Logger
	max      int64
	platform *v1.Platform

	mu     sync.Mutex
	images map[string]*imageEntry // by reference as given
	files  map[string]*fileEntry  // by digest + "\x00" + path
}

type imageEntry struct {
	once sync.Once
	img  v1.Image
	res  registry.Resolved
	err  error
}

type fileEntry struct {
	once sync.Once
	data []byte
	mode uint32
	err  error
}

var _ model.ImageFiles = (*Reader)(nil)

// New returns a Reader that reaches images through reg (nil: zero Options).
func New(reg *registry.Options, opts ...Option) *Reader {
	if reg == nil {
		reg = &registry.Options{}
	}
	r := &Reader{
		reg:    reg,
		max:    model.MaxImageFileSize,
		images: map[string]*imageEntry{},
		files:  map[string]*fileEntry{},
	}
	for _, o := range opts {
		o(r)
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r
}

// ReadFile returns the content and mode of file p inside image, and the
// image reference pinned by digest.
func (r *Reader) ReadFile(ctx context.Context, image, p string) ([]byte, uint32, string, error) {
	want, err := cleanPath(p)
	if err != nil {
		return nil, 0, "", fmt.Errorf("image %s: %v", image, err)
	}
	r.mu.Lock()
	ie, ok := r.images[image]
	if !ok {
		ie = &imageEntry{}
		r.images[image] = ie
	}
	r.mu.Unlock()
	ie.once.Do(func() {
		ie.img, ie.res, ie.err = r.reg.Image(ctx, image, r.platform)
		if ie.err == nil {
			r.log.Debug("resolved image", "image", image, "pinned", ie.res.Digested())
		}
	})
	if ie.err != nil {
		// Do not cache failures caused by a cancelled context.
		if ctx.Err() != nil {
			r.mu.Lock()
			delete(r.images, image)
			r.mu.Unlock()
		}
		return nil, 0, "", ie.err
	}
	pinned := ie.res.Digested()
	key := ie.res.Digest.String() + "\x00" + want
	r.mu.Lock()
	fe, ok := r.files[key]
	if !ok {
		fe = &fileEntry{}
		r.files[key] = fe
	}
	r.mu.Unlock()
	fe.once.Do(func() {
		fe.data, fe.mode, fe.err = r.find(ctx, ie.img, want)
	})
	if fe.err != nil {
		if ctx.Err() != nil {
			r.mu.Lock()
			delete(r.files, key)
			r.mu.Unlock()
		}
		return nil, 0, "", fmt.Errorf("image %s (%s): %s: %w", image, pinned, p, fe.err)
	}
	return fe.data, fe.mode, pinned, nil
}

// cleanPath turns "/bin/x" or "bin/x" into the tar form "bin/x".
func cleanPath(p string) (string, error) {
	if p == "" || strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("invalid path in image %q", p)
	}
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	if c == "" {
		return "", fmt.Errorf("invalid path in image %q: names the root", p)
	}
	return c, nil
}

func entryName(n string) string {
	n = strings.TrimPrefix(n, "./")
	return strings.TrimPrefix(path.Clean("/"+n), "/")
}

// under reports whether p is dir or inside it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func (r *Reader) find(ctx context.Context, img v1.Image, want string) ([]byte, uint32, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, 0, err
	}
	for i := len(layers) - 1; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		data, mode, found, hidden, err := r.scan(ctx, layers[i], want)
		if err != nil {
			return nil, 0, fmt.Errorf("layer %d: %w", i, err)
		}
		if found {
			return data, mode, nil
		}
		if hidden {
			return nil, 0, fmt.Errorf("%w (removed by a whiteout in layer %d)", ErrNotFound, i)
		}
	}
	return nil, 0, ErrNotFound
}

// scan reads one layer. found: the file is in this layer; hidden: a whiteout
// in this layer hides lower copies.
func (r *Reader) scan(ctx context.Context, l v1.Layer, want string) (data []byte, mode uint32, found, hidden bool, err error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, 0, false, false, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		if err := ctx.Err(); err != nil {
			return nil, 0, false, false, err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, 0, false, false, err
		}
		name := entryName(h.Name)
		dir, base := path.Split(name)
		dir = strings.TrimSuffix(dir, "/")
		if strings.HasPrefix(base, ".wh.") {
			if base == ".wh..wh..opq" {
				if dir == "" || under(want, dir) {
					hidden = true
				}
			} else if under(want, path.Join(dir, strings.TrimPrefix(base, ".wh."))) {
				hidden = true
			}
			continue
		}
		if name != want {
			continue
		}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // TypeRegA is found in old images
			if h.Size > r.max {
				return nil, 0, false, false, fmt.Errorf("%s is %d bytes, over the limit of %d bytes", want, h.Size, r.max)
			}
			b, err := io.ReadAll(io.LimitReader(tr, r.max+1))
			if err != nil {
				return nil, 0, false, false, err
			}
			return b, uint32(h.Mode) & 0o7777, true, false, nil
		case tar.TypeLink:
			// A hard link names an earlier entry of the same layer.
			hardTarget := entryName(h.Linkname)
			data, mode, ok, err := r.rescan(ctx, l, hardTarget)
			if err != nil {
				return nil, 0, false, false, err
			}
			if !ok {
				return nil, 0, false, false, fmt.Errorf("%s is a hard link to %s, which is not in the layer", want, hardTarget)
			}
			return data, mode, true, false, nil
		case tar.TypeSymlink:
			return nil, 0, false, false, fmt.Errorf("%s is a symbolic link to %q; name the target file instead", want, h.Linkname)
		case tar.TypeDir:
			return nil, 0, false, false, fmt.Errorf("%s is a directory", want)
		default:
			return nil, 0, false, false, fmt.Errorf("%s is not a regular file (tar type %q)", want, h.Typeflag)
		}
	}
	return nil, 0, false, hidden, nil
}

// rescan reads layer l again for the regular file target (a hard link's
// target).
func (r *Reader) rescan(ctx context.Context, l v1.Layer, target string) ([]byte, uint32, bool, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, 0, false, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		if err := ctx.Err(); err != nil {
			return nil, 0, false, err
		}
		h, err := tr.Next()
		if err == io.EOF {
			return nil, 0, false, nil
		}
		if err != nil {
			return nil, 0, false, err
		}
		if entryName(h.Name) != target || (h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeRegA) { //nolint:staticcheck
			continue
		}
		if h.Size > r.max {
			return nil, 0, false, fmt.Errorf("%s is %d bytes, over the limit of %d bytes", target, h.Size, r.max)
		}
		b, err := io.ReadAll(io.LimitReader(tr, r.max+1))
		if err != nil {
			return nil, 0, false, err
		}
		return b, uint32(h.Mode) & 0o7777, true, nil
	}
}
