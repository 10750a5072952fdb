package render

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/oslayer/oslayer/render/tree"
	"github.com/oslayer/oslayer/sources/model"
)

// clearDropInDirs removes, with whiteouts, the drop-in directories
// /etc/systemd/system/NAME.d that the base ships for units the source's
// agent clears (model.Unit.ClearDropIns: gardener-node-agent removes the
// directory of a unit without drop-ins before it enables the unit). From
// here on the placer sees the base without them, so enablement does not
// read their [Install] lines, as on the node.
func (p *placer) clearDropInDirs(units []model.Unit) {
	if p.req.Base == nil {
		return
	}
	var hidden []string
	for _, u := range units {
		if !u.ClearDropIns || len(u.DropIns) > 0 || model.ValidateUnitName(u.Name) != nil {
			continue
		}
		dir := path.Join(UnitDir, u.Name+".d")
		if _, err := fs.Lstat(p.req.Base, dir[1:]); err != nil {
			continue
		}
		hidden = append(hidden, dir[1:])
		p.add(tree.Entry{Path: dir, Kind: tree.Whiteout, Layer: LayerConfig}, Baked{Path: dir, Source: u.Origin, Generated: true})
		p.warns = append(p.warns, fmt.Sprintf("%s: unit %s has no drop-ins: the node agent removes %s, which the base image ships; the image removes it too", u.Origin, u.Name, dir))
	}
	if len(hidden) > 0 {
		p.req.Base = hideFS{p.req.Base, hidden}
	}
}

// hideFS is fsys without the hidden paths (slash-separated, no leading
// slash) and everything below them.
type hideFS struct {
	fsys   fs.FS
	hidden []string
}

var (
	_ fs.ReadDirFS  = hideFS{}
	_ fs.ReadLinkFS = hideFS{}
	_ fs.StatFS     = hideFS{}
)

func (h hideFS) gone(name string) bool {
	return slices.ContainsFunc(h.hidden, func(d string) bool { return name == d || strings.HasPrefix(name, d+"/") })
}

func (h hideFS) notExist(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

func (h hideFS) Open(name string) (fs.File, error) {
	if h.gone(name) {
		return nil, h.notExist("open", name)
	}
	return h.fsys.Open(name)
}

func (h hideFS) Stat(name string) (fs.FileInfo, error) {
	if h.gone(name) {
		return nil, h.notExist("stat", name)
	}
	return fs.Stat(h.fsys, name)
}

func (h hideFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if h.gone(name) {
		return nil, h.notExist("readdir", name)
	}
	ents, err := fs.ReadDir(h.fsys, name)
	return slices.DeleteFunc(ents, func(e fs.DirEntry) bool { return h.gone(path.Join(name, e.Name())) }), err
}

func (h hideFS) ReadLink(name string) (string, error) {
	if h.gone(name) {
		return "", h.notExist("readlink", name)
	}
	if rl, ok := h.fsys.(fs.ReadLinkFS); ok {
		return rl.ReadLink(name)
	}
	return "", &fs.PathError{Op: "readlink", Path: name, Err: errors.ErrUnsupported}
}

func (h hideFS) Lstat(name string) (fs.FileInfo, error) {
	if h.gone(name) {
		return nil, h.notExist("lstat", name)
	}
	return fs.Lstat(h.fsys, name)
}
