package builder

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"testing/fstest"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/layers/systemd"
)

// DefaultBaseUnitsMax bounds the compressed bytes BaseUnits reads when
// Build reads the units of a local base (64 MiB): a bigger base is not read
// and shipped units are enabled with the renderer's documented fallback.
const DefaultBaseUnitsMax = 64 << 20

// maxUnitFile bounds one unit file read from a base.
const maxUnitFile = 4 << 20

// ErrBaseTooLarge is returned by BaseUnits when the base's layers exceed
// the byte budget.
var ErrBaseTooLarge = errors.New("base image larger than the budget for reading its units")

// BaseUnits returns the systemd unit directories of img (regular files and
// symlinks under etc/systemd/system, usr/lib/systemd/system, ...) as an
// in-memory root tree, with the layers applied bottom to top (whiteouts
// honoured). The renderer reads the [Install] sections of units the OS ships
// from it. It reads every layer blob of img, so Build uses it only for
// bases in a local OCI layout, where no byte crosses the network; maxBytes
// bounds the compressed bytes read (ErrBaseTooLarge beyond).
func BaseUnits(ctx context.Context, img v1.Image, maxBytes int64) (fs.FS, error) {
	ls, err := img.Layers()
	if err != nil {
		return nil, err
	}
	var total int64
	for _, l := range ls {
		n, err := l.Size()
		if err != nil {
			return nil, err
		}
		total += n
	}
	if total > maxBytes {
		return nil, fmt.Errorf("%w: %d bytes, budget %d", ErrBaseTooLarge, total, maxBytes)
	}
	tree := fstest.MapFS{}
	for i, l := range ls {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := applyLayer(tree, l); err != nil {
			d, _ := l.Digest()
			return nil, fmt.Errorf("base layer %d (%s): %w", i, d, err)
		}
	}
	return tree, nil
}

// inUnitDir reports whether p (relative to the root) lies in one of the
// unit directories systemd searches, the ones BaseUnits keeps.
func inUnitDir(p string) bool {
	for _, d := range systemd.UnitDirs() {
		d = strings.TrimPrefix(d, "/") + "/"
		if strings.HasPrefix(p, d) && len(p) > len(d) {
			return true
		}
	}
	return false
}

func applyLayer(tree fstest.MapFS, l v1.Layer) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := path.Clean(strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/"))
		dir, base := path.Split(p)
		if base == ".wh..wh..opq" {
			for k := range tree {
				if strings.HasPrefix(k, dir) {
					delete(tree, k)
				}
			}
			continue
		}
		if strings.HasPrefix(base, ".wh.") {
			gone := dir + strings.TrimPrefix(base, ".wh.")
			for k := range tree {
				if k == gone || strings.HasPrefix(k, gone+"/") {
					delete(tree, k)
				}
			}
			continue
		}
		if !inUnitDir(p) {
			continue
		}
		switch h.Typeflag {
		case tar.TypeReg:
			if h.Size > maxUnitFile {
				delete(tree, p)
				continue
			}
			data, err := io.ReadAll(io.LimitReader(tr, maxUnitFile))
			if err != nil {
				return err
			}
			tree[p] = &fstest.MapFile{Data: data, Mode: fs.FileMode(h.Mode).Perm(), ModTime: h.ModTime}
		case tar.TypeSymlink:
			tree[p] = &fstest.MapFile{Data: []byte(h.Linkname), Mode: fs.ModeSymlink | 0o777, ModTime: h.ModTime}
		default:
			// A later directory or other entry replaces a file of the same name.
			delete(tree, p)
		}
	}
}
