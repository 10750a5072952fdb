package systemd

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// UnitDirs are the system unit directories searched in a tree, in systemd's
// order of precedence (runtime directories under /run are empty in an image).
var UnitDirs = []string{
	"/etc/systemd/system",
	"/usr/local/lib/systemd/system",
	"/usr/lib/systemd/system",
	"/lib/systemd/system",
}

// ErrNotFound and ErrMasked are returned (wrapped) by LoadFromFS.
var (
	ErrNotFound = errors.New("unit not found")
	ErrMasked   = errors.New("unit is masked")
)

// maxSymlinks bounds symlink following (systemd's UNIT_FILE_FOLLOW_SYMLINK_MAX).
const maxSymlinks = 64

// maxUnitSize bounds the unit files read from a tree.
const maxUnitSize = 4 << 20

// FindInFS finds unit name in a root tree (fsys is rooted at "/") the way
// systemctl does: the first of UnitDirs that has it; a symlink there is an
// alias and is followed (absolute targets resolve inside fsys) to the real
// unit, whose name and path are returned; an instance name with no file of
// its own resolves to its template's file. ok is false when the unit is not
// found, masked, or its file cannot be read or parsed (LoadFromFS says why).
func FindInFS(fsys fs.FS, name string) (UnitFile, bool) {
	u, err := LoadFromFS(fsys, name)
	return u, err == nil
}

// FSLookup returns a Lookup backed by FindInFS.
func FSLookup(fsys fs.FS) Lookup {
	return func(name string) (UnitFile, bool) { return FindInFS(fsys, name) }
}

// LoadFromFS is FindInFS with the reason for a miss: ErrNotFound, ErrMasked
// (wrapped), or a read or parse error naming the file.
func LoadFromFS(fsys fs.FS, name string) (UnitFile, error) {
	if Classify(name) == Invalid {
		return UnitFile{}, fmt.Errorf("%q is not a valid unit name", name)
	}
	u, err := load(fsys, name)
	if errors.Is(err, ErrNotFound) {
		if t, ok := TemplateOf(name); ok {
			u, err = load(fsys, t)
			if err == nil {
				u.Name = withInstance(u.Name, instanceOf(name))
			}
		}
	}
	if errors.Is(err, ErrNotFound) {
		return UnitFile{}, fmt.Errorf("%s: %w in %s", name, ErrNotFound, strings.Join(UnitDirs, ", "))
	}
	return u, err
}

func load(fsys fs.FS, name string) (UnitFile, error) {
	for _, dir := range UnitDirs {
		p := dir + "/" + name
		if _, err := lstat(fsys, p); err != nil {
			continue
		}
		return follow(fsys, name, p)
	}
	return UnitFile{}, ErrNotFound
}

// follow resolves symlinks from p (a node path) and reads the unit file.
func follow(fsys fs.FS, name, p string) (UnitFile, error) {
	for range maxSymlinks {
		fi, err := lstat(fsys, p)
		if err != nil {
			return UnitFile{}, fmt.Errorf("%s: %w", p, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if !fi.Mode().IsRegular() {
				return UnitFile{}, fmt.Errorf("%s: not a regular file", p)
			}
			if fi.Size() > maxUnitSize {
				return UnitFile{}, fmt.Errorf("%s: larger than %d bytes", p, maxUnitSize)
			}
			data, err := fs.ReadFile(fsys, rel(p))
			if err != nil {
				return UnitFile{}, fmt.Errorf("%s: %w", p, err)
			}
			in, err := ParseInstall(string(data))
			if err != nil {
				return UnitFile{}, fmt.Errorf("%s: %w", p, err)
			}
			return UnitFile{Name: name, Path: p, Install: in}, nil
		}
		t, err := fs.ReadLink(fsys, rel(p))
		if err != nil {
			return UnitFile{}, fmt.Errorf("%s: %w", p, err)
		}
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(p), t)
		}
		t = path.Clean(t)
		if t == "/dev/null" {
			return UnitFile{}, fmt.Errorf("%s: %w", name, ErrMasked)
		}
		// A symlink to another unit name is an alias: the unit is the
		// target. An instance linked to its template keeps its name.
		base := path.Base(t)
		switch {
		case base == name:
		case Classify(base) == Template && Classify(name) == Instance:
			if tn, _ := TemplateOf(name); tn != base {
				name = withInstance(base, instanceOf(name))
			}
		case Classify(base) != Invalid:
			name = base
		}
		p = t
	}
	return UnitFile{}, fmt.Errorf("%s: too many levels of symbolic links", p)
}

func rel(p string) string {
	r := strings.TrimPrefix(path.Clean(p), "/")
	if r == "" {
		return "."
	}
	return r
}

// lstat is fs.Lstat where the FS supports it, fs.Stat otherwise.
func lstat(fsys fs.FS, p string) (fs.FileInfo, error) {
	if _, ok := fsys.(fs.ReadLinkFS); ok {
		return fs.Lstat(fsys, rel(p))
	}
	return fs.Stat(fsys, rel(p))
}
