package systemd

import (
	"errors"
	"io"
	"io/fs"
	"sort"
)

// Overlay returns a read-only fs.FS that shows upper over lower, like the
// image a layer builds on a base: a path upper has hides lower's, and a
// directory both have lists the entries of both (upper's win by name).
// There are no whiteouts. Use it to find units in the image being built:
// FindInFS(Overlay(configTree, baseTree), name) sees the configuration's
// units and drop-ins and the base's exactly as systemctl would. A nil
// lower (or upper) is an empty tree.
func Overlay(upper, lower fs.FS) fs.FS {
	return overlay{upper, lower}
}

type overlay struct{ upper, lower fs.FS }

var (
	_ fs.ReadDirFS  = overlay{}
	_ fs.ReadLinkFS = overlay{}
	_ fs.StatFS     = overlay{}
)

// layers returns the trees in order of precedence.
func (o overlay) layers() []fs.FS {
	var ls []fs.FS
	for _, f := range []fs.FS{o.upper, o.lower} {
		if f != nil {
			ls = append(ls, f)
		}
	}
	return ls
}

func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

func (o overlay) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	for _, l := range o.layers() {
		f, err := l.Open(name)
		if err != nil {
			if notExist(err) {
				continue
			}
			return nil, err
		}
		fi, err := f.Stat()
		if err != nil || !fi.IsDir() {
			return f, err
		}
		// A directory: its listing merges the layers.
		entries, err := o.ReadDir(name)
		if err != nil {
			f.Close()
			return nil, err
		}
		return &dir{File: f, info: fi, entries: entries}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// dir is an open directory of the overlay with the merged listing.
type dir struct {
	fs.File
	info    fs.FileInfo
	entries []fs.DirEntry
	off     int
}

func (d *dir) Stat() (fs.FileInfo, error) { return d.info, nil }

func (d *dir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	if n > len(rest) {
		n = len(rest)
	}
	d.off += n
	return rest[:n], nil
}

func (o overlay) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	for _, l := range o.layers() {
		fi, err := fs.Stat(l, name)
		if err == nil || !notExist(err) {
			return fi, err
		}
	}
	return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

func (o overlay) Lstat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrInvalid}
	}
	for _, l := range o.layers() {
		fi, err := lstatFS(l, name)
		if err == nil || !notExist(err) {
			return fi, err
		}
	}
	return nil, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrNotExist}
}

func (o overlay) ReadLink(name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	for _, l := range o.layers() {
		if _, err := lstatFS(l, name); err != nil {
			if notExist(err) {
				continue
			}
			return "", err
		}
		return fs.ReadLink(l, name)
	}
	return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrNotExist}
}

func (o overlay) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	byName := map[string]fs.DirEntry{}
	found := false
	for _, l := range o.layers() {
		fi, err := fs.Stat(l, name)
		if err != nil {
			if notExist(err) {
				continue
			}
			return nil, err
		}
		if !fi.IsDir() {
			if !found {
				return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
			}
			break // a non-directory below a directory is hidden
		}
		found = true
		entries, err := fs.ReadDir(l, name)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if _, ok := byName[e.Name()]; !ok {
				byName[e.Name()] = e
			}
		}
	}
	if !found {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	out := make([]fs.DirEntry, 0, len(byName))
	for _, e := range byName {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// lstatFS is fs.Lstat where supported, fs.Stat otherwise.
func lstatFS(fsys fs.FS, name string) (fs.FileInfo, error) {
	if _, ok := fsys.(fs.ReadLinkFS); ok {
		return fs.Lstat(fsys, name)
	}
	return fs.Stat(fsys, name)
}
