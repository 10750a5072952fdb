package systemd

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// unitDirs are the system unit directories searched in a tree, in systemd's
// order of precedence (runtime directories under /run are empty in an image).
var unitDirs = [...]string{
	"/etc/systemd/system",
	"/usr/local/lib/systemd/system",
	"/usr/lib/systemd/system",
	"/lib/systemd/system",
}

// UnitDirs returns the system unit directories FindInFS searches, in
// systemd's order of precedence (runtime directories under /run are empty in
// an image).
func UnitDirs() []string { return append([]string(nil), unitDirs[:]...) }

// ErrNotFound, ErrMasked and ErrLinked are returned (wrapped) by
// LoadFromFS.
var (
	ErrNotFound = errors.New("unit not found")
	// ErrLinked is a symlink in /etc/systemd/system to another unit file
	// of the search path: systemctl refuses to enable it.
	ErrLinked = errors.New("refusing to operate on linked unit file")
	ErrMasked = errors.New("unit is masked")
)

// maxSymlinks bounds symlink following (systemd's UNIT_FILE_FOLLOW_SYMLINK_MAX).
const maxSymlinks = 64

// maxUnitSize bounds the unit files read from a tree.
const maxUnitSize = 4 << 20

// FindInFS finds unit name in a root tree (fsys is rooted at "/") the way
// systemctl 252 does: the first of UnitDirs() that has it; symlinks resolve
// inside fsys (absolute targets against its root); a symlink to a unit file
// of another unit directory is an alias, followed to the real unit, whose
// name and path are returned (in /etc/systemd/system such a symlink is
// refused: ErrLinked); a symlink to a file outside the unit directories is
// a linked unit that keeps its name; an instance name with no file of
// its own resolves to its template's file. The unit's ".conf" drop-ins
// (NAME.d/ in every unit directory, and the template's for an instance)
// are read after it, as systemctl does for [Install] (see
// ParseInstallDropIns). ok is false when the unit is not
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
	u, text, err := load(fsys, name)
	if errors.Is(err, ErrNotFound) {
		if t, ok := TemplateOf(name); ok {
			u, text, err = load(fsys, t)
			if err == nil {
				u.Name = withInstance(u.Name, instanceOf(name))
			}
		}
	}
	if errors.Is(err, ErrNotFound) {
		return UnitFile{}, fmt.Errorf("%s: %w in %s", name, ErrNotFound, strings.Join(unitDirs[:], ", "))
	}
	if err != nil {
		return UnitFile{}, err
	}
	names := []string{u.Name}
	if t, ok := TemplateOf(u.Name); ok {
		names = append(names, t)
	}
	dropins, err := loadDropIns(fsys, names)
	if err != nil {
		return UnitFile{}, err
	}
	u.Install, err = ParseInstallDropIns(text, dropins)
	if err != nil {
		return UnitFile{}, fmt.Errorf("%s: %w", u.Path, err)
	}
	return u, nil
}

// loadDropIns reads the ".conf" drop-ins of names (a unit and, for an
// instance, its template) from every unit directory, as systemctl does for
// [Install]: a file name seen first hides the same name later, in the order
// instance then template, each through the unit directories by precedence;
// a drop-in linked to /dev/null masks the name.
func loadDropIns(fsys fs.FS, names []string) ([]DropIn, error) {
	seen := map[string]bool{}
	var ds []DropIn
	for _, n := range names {
		for _, dir := range unitDirs {
			d := dir + "/" + n + ".d"
			entries, err := fs.ReadDir(fsys, rel(d))
			if err != nil {
				continue
			}
			for _, e := range entries {
				fn := e.Name()
				if !strings.HasSuffix(fn, ".conf") || seen[fn] {
					continue
				}
				seen[fn] = true
				p, err := resolve(fsys, d+"/"+fn)
				if errors.Is(err, ErrMasked) {
					continue
				}
				if err != nil {
					return nil, err
				}
				data, err := readUnit(fsys, p)
				if err != nil {
					return nil, err
				}
				ds = append(ds, DropIn{Name: fn, Text: string(data)})
			}
		}
	}
	return ds, nil
}

// resolve follows symlinks from node path p inside fsys (absolute targets
// resolve against its root); a link to /dev/null is ErrMasked.
func resolve(fsys fs.FS, p string) (string, error) {
	for range maxSymlinks {
		fi, err := lstat(fsys, p)
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		t, err := fs.ReadLink(fsys, rel(p))
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(p), t)
		}
		p = path.Clean(t)
		if p == "/dev/null" {
			return "", fmt.Errorf("%s: %w", p, ErrMasked)
		}
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", p)
}

// readUnit reads a regular file of at most maxUnitSize bytes.
func readUnit(fsys fs.FS, p string) ([]byte, error) {
	fi, err := fs.Stat(fsys, rel(p))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	if fi.Size() > maxUnitSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", p, maxUnitSize)
	}
	data, err := fs.ReadFile(fsys, rel(p))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return data, nil
}

func load(fsys fs.FS, name string) (UnitFile, string, error) {
	for _, dir := range unitDirs {
		p := dir + "/" + name
		if _, err := lstat(fsys, p); err != nil {
			continue
		}
		return follow(fsys, name, dir, p)
	}
	return UnitFile{}, "", ErrNotFound
}

// inSearchPath reports whether node path p is directly in a unit directory.
func inSearchPath(p string) bool {
	d := path.Dir(p)
	for _, u := range unitDirs {
		if d == u {
			return true
		}
	}
	return false
}

// follow resolves symlinks from p (a node path in unit directory dir) and
// reads the unit file, with systemctl 252's rules: a symlink to a file
// outside the unit directories is a linked unit (it keeps its name, its
// path is the target); in /etc/systemd/system a symlink to another unit
// file of the search path is refused (ErrLinked); elsewhere it is an alias
// and the unit is its target.
func follow(fsys fs.FS, name, dir, p string) (UnitFile, string, error) {
	if fi, err := lstat(fsys, p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		final, err := resolve(fsys, p)
		if err != nil {
			if errors.Is(err, ErrMasked) {
				return UnitFile{}, "", fmt.Errorf("%s: %w", name, ErrMasked)
			}
			return UnitFile{}, "", err
		}
		switch {
		case !inSearchPath(final):
			data, err := readUnit(fsys, final)
			if err != nil {
				return UnitFile{}, "", err
			}
			return UnitFile{Name: name, Path: final}, string(data), nil
		case dir == SystemDir:
			return UnitFile{}, "", fmt.Errorf("%s: %w %s", name, ErrLinked, p)
		}
	}
	for range maxSymlinks {
		fi, err := lstat(fsys, p)
		if err != nil {
			return UnitFile{}, "", fmt.Errorf("%s: %w", p, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			data, err := readUnit(fsys, p)
			if err != nil {
				return UnitFile{}, "", err
			}
			return UnitFile{Name: name, Path: p}, string(data), nil
		}
		t, err := fs.ReadLink(fsys, rel(p))
		if err != nil {
			return UnitFile{}, "", fmt.Errorf("%s: %w", p, err)
		}
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(p), t)
		}
		t = path.Clean(t)
		if t == "/dev/null" {
			return UnitFile{}, "", fmt.Errorf("%s: %w", name, ErrMasked)
		}
		// An instance linked to its template keeps its name.
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
	return UnitFile{}, "", fmt.Errorf("%s: too many levels of symbolic links", p)
}

func rel(p string) string {
	r := strings.TrimPrefix(path.Clean(p), "/")
	if r == "" {
		return "."
	}
	return r
}

// lstat is lstatFS for a node path.
func lstat(fsys fs.FS, p string) (fs.FileInfo, error) {
	return lstatFS(fsys, rel(p))
}
