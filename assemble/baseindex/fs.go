package baseindex

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// FS is the index's view of the base's root tree, rooted at "/" (names are
// relative: "etc/passwd"). Symlinks resolve inside the tree (absolute
// targets against its root), also in the middle of a path. Regular files
// the index records (ContentPath) read their content; other regular files
// have their metadata only and reading them fails with ErrNotIndexed.
// FileInfo.Sys returns the Entry (owner, link target).
type FS struct {
	ix       *Index
	children map[string][]string // directory → sorted child names
}

var (
	_ fs.ReadLinkFS = (*FS)(nil)
	_ fs.StatFS     = (*FS)(nil)
	_ fs.ReadDirFS  = (*FS)(nil)
	_ fs.ReadFileFS = (*FS)(nil)
)

// maxLinks bounds symlink resolution (the kernel's limit).
const maxLinks = 40

// FS returns the index's view of the root tree. It is safe for concurrent
// use and built once per index.
func (ix *Index) FS() *FS {
	ix.init()
	return ix.view
}

func newFS(ix *Index) *FS {
	f := &FS{ix: ix, children: map[string][]string{}}
	for _, e := range ix.Entries {
		d, name := path.Split(e.Path)
		d = strings.TrimSuffix(d, "/")
		f.children[d] = append(f.children[d], name)
	}
	for _, c := range f.children {
		sort.Strings(c)
	}
	return f
}

var rootEntry = Entry{Path: "", Type: TypeDir, Mode: 0o755}

// walk resolves name; symlinks in the middle always resolve, the last
// element only when follow is set. It returns the entry reached.
func (f *FS) walk(op, name string, follow bool) (Entry, error) {
	if !fs.ValidPath(name) {
		return Entry{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return rootEntry, nil
	}
	comps := strings.Split(name, "/")
	cur := ""
	links := 0
	e := rootEntry
	for i := 0; i < len(comps); i++ {
		next := comps[i]
		if cur != "" {
			next = cur + "/" + comps[i]
		}
		j, ok := f.ix.byPath[next]
		if !ok {
			return Entry{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		e = f.ix.Entries[j]
		last := i == len(comps)-1
		if e.Type == TypeSymlink && (!last || follow) {
			if links++; links > maxLinks {
				return Entry{}, &fs.PathError{Op: op, Path: name, Err: errors.New("too many levels of symbolic links")}
			}
			dir := cur
			if path.IsAbs(e.Link) {
				dir = ""
			}
			t := cleanRel(path.Join("/", dir, e.Link))
			var rest []string
			if t != "" {
				rest = strings.Split(t, "/")
			}
			comps = append(rest, comps[i+1:]...)
			cur, i, e = "", -1, rootEntry
			continue
		}
		if !last && e.Type != TypeDir {
			return Entry{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		cur = next
	}
	return e, nil
}

// Open opens name, following symlinks.
func (f *FS) Open(name string) (fs.File, error) {
	e, err := f.walk("open", name, true)
	if err != nil {
		return nil, err
	}
	fi := info{name: path.Base(name), e: e}
	if e.Type == TypeDir {
		ents, err := f.readDir(e.Path)
		if err != nil {
			return nil, err
		}
		return &dirFile{info: fi, entries: ents}, nil
	}
	return &file{info: fi, path: name, r: bytes.NewReader(e.Content)}, nil
}

// Stat returns the FileInfo of name, following symlinks.
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	e, err := f.walk("stat", name, true)
	if err != nil {
		return nil, err
	}
	return info{name: path.Base(name), e: e}, nil
}

// Lstat returns the FileInfo of name without following a final symlink.
func (f *FS) Lstat(name string) (fs.FileInfo, error) {
	e, err := f.walk("lstat", name, false)
	if err != nil {
		return nil, err
	}
	return info{name: path.Base(name), e: e}, nil
}

// ReadLink returns the target of the symlink name.
func (f *FS) ReadLink(name string) (string, error) {
	e, err := f.walk("readlink", name, false)
	if err != nil {
		return "", err
	}
	if e.Type != TypeSymlink {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	return e.Link, nil
}

// ReadFile returns the content of name (following symlinks), or an error
// wrapping ErrNotIndexed for a file the index has no content of.
func (f *FS) ReadFile(name string) ([]byte, error) {
	e, err := f.walk("read", name, true)
	if err != nil {
		return nil, err
	}
	switch {
	case e.Type == TypeDir:
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	case e.Type != TypeFile || !e.Indexed:
		return nil, &fs.PathError{Op: "read", Path: name, Err: ErrNotIndexed}
	}
	return bytes.Clone(e.Content), nil
}

// ReadDir lists directory name (following symlinks), sorted by name.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	e, err := f.walk("readdir", name, true)
	if err != nil {
		return nil, err
	}
	if e.Type != TypeDir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	return f.readDir(e.Path)
}

func (f *FS) readDir(dir string) ([]fs.DirEntry, error) {
	names := f.children[dir]
	out := make([]fs.DirEntry, 0, len(names))
	for _, n := range names {
		p := n
		if dir != "" {
			p = dir + "/" + n
		}
		out = append(out, fs.FileInfoToDirEntry(info{name: n, e: f.ix.Entries[f.ix.byPath[p]]}))
	}
	return out, nil
}

// info is the FileInfo of an entry.
type info struct {
	name string
	e    Entry
}

func (i info) Name() string { return i.name }
func (i info) Size() int64  { return i.e.Size }
func (i info) Mode() fs.FileMode {
	m := fs.FileMode(i.e.Mode & 0o777)
	if i.e.Mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if i.e.Mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if i.e.Mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	switch i.e.Type {
	case TypeDir:
		m |= fs.ModeDir
	case TypeSymlink:
		m |= fs.ModeSymlink
	case TypeChar:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case TypeBlock:
		m |= fs.ModeDevice
	case TypeFifo:
		m |= fs.ModeNamedPipe
	}
	return m
}
func (i info) ModTime() time.Time { return time.Time{} }
func (i info) IsDir() bool        { return i.e.Type == TypeDir }
func (i info) Sys() any           { e := i.e; return &e }

type file struct {
	info
	path string
	r    *bytes.Reader
}

func (f *file) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *file) Close() error               { return nil }
func (f *file) Read(b []byte) (int, error) {
	if f.e.Type != TypeFile || !f.e.Indexed {
		return 0, &fs.PathError{Op: "read", Path: f.path, Err: ErrNotIndexed}
	}
	return f.r.Read(b)
}

type dirFile struct {
	info
	entries []fs.DirEntry
	off     int
}

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dirFile) Close() error               { return nil }
func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: errors.New("is a directory")}
}
func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
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
