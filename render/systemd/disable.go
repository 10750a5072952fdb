package systemd

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Removal is what `systemctl disable` removes from a tree: symlinks and the
// directories they leave empty (node paths, sorted).
type Removal struct {
	Links []string `json:"links,omitempty"`
	Dirs  []string `json:"dirs,omitempty"`
}

// Empty reports whether nothing is removed.
func (r Removal) Empty() bool { return len(r.Links) == 0 && len(r.Dirs) == 0 }

// maxDisableWalk bounds the symlinks one DisableLinks walk looks at.
const maxDisableWalk = 1 << 16

// DisableLinks returns what `systemctl --root=DIR disable NAMES...`
// (systemd 252) removes from the root tree fsys, without changing it:
//
//   - The names are marked, and so are, recursively, the units their
//     [Install] Also= names and the unit an alias name resolves to. A unit
//     that is not found is still marked by name; a masked unit is not
//     marked (systemctl ignores it).
//   - Every symlink below /etc/systemd/system (in any subdirectory, not
//     following symlinked directories) whose file name is a unit name is
//     removed when its name is marked, or the file it resolves to inside the
//     tree (absolute targets against the root; a missing tail is kept as
//     written) has a marked path or a marked file name. A removed link's own
//     path is marked in turn, so links to it go too.
//   - A directory a removal leaves empty is removed, and so are its parents
//     up to /etc/systemd/system, which stays (systemctl's rmdir_parents).
//
// Links that merely enable other units stay, as do regular files and
// links in /usr. Errors name a unit name that is not valid or a unit whose
// [Install] section cannot be read.
func DisableLinks(fsys fs.FS, names ...string) (Removal, error) {
	marked := map[string]bool{}
	var errs []error
	seen := map[string]bool{}
	queue := append([]string(nil), names...)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		if len(seen) > maxAlso {
			errs = append(errs, fmt.Errorf("disable: more than %d units through Also=", maxAlso))
			break
		}
		if Classify(name) == Invalid {
			errs = append(errs, fmt.Errorf("disable: %q is not a valid unit name", name))
			continue
		}
		u, err := LoadFromFS(fsys, name)
		switch {
		case errors.Is(err, ErrMasked):
			continue // "Unit file NAME is masked, ignoring."
		case errors.Is(err, ErrLinked):
			// disable follows links in /etc/systemd/system: the unit
			// behind the link is disabled too.
			if p, rerr := resolve(fsys, SystemDir+"/"+name); rerr == nil {
				queue = append(queue, path.Base(p))
			}
		case errors.Is(err, ErrNotFound):
		case err != nil:
			errs = append(errs, fmt.Errorf("disable %s: %w", name, err))
		default:
			if u.Name != name {
				queue = append(queue, u.Name)
			}
			steps, derr := defaultInstance(u)
			if derr == nil {
				also, aerr := alsoNames(u, steps)
				if aerr != nil {
					errs = append(errs, fmt.Errorf("disable %s: %w", name, aerr))
				}
				queue = append(queue, also...)
			}
		}
		marked[name] = true
	}
	d := &disabler{fsys: fsys, marked: marked, gone: map[string]bool{}}
	for restart := true; restart; {
		restart = false
		n := 0
		if err := d.walk(SystemDir, &restart, &n); err != nil {
			errs = append(errs, err)
			break
		}
	}
	var r Removal
	for p, isDir := range d.gone {
		if isDir {
			r.Dirs = append(r.Dirs, p)
		} else {
			r.Links = append(r.Links, p)
		}
	}
	sort.Strings(r.Links)
	sort.Strings(r.Dirs)
	return r, errors.Join(errs...)
}

type disabler struct {
	fsys   fs.FS
	marked map[string]bool
	// gone holds removed paths: true for a directory.
	gone map[string]bool
}

// walk removes the marked links below dir (a node path), depth first in
// name order; restart is set when a removal marks a new path.
func (d *disabler) walk(dir string, restart *bool, n *int) error {
	entries, err := fs.ReadDir(d.fsys, rel(dir))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("disable: %s: %w", dir, err)
	}
	for _, e := range entries {
		p := dir + "/" + e.Name()
		if _, ok := d.gone[p]; ok {
			continue
		}
		switch {
		case e.IsDir():
			if err := d.walk(p, restart, n); err != nil {
				return err
			}
		case e.Type()&fs.ModeSymlink != 0:
			if *n++; *n > maxDisableWalk {
				return fmt.Errorf("disable: more than %d links below %s", maxDisableWalk, SystemDir)
			}
			if Classify(e.Name()) == Invalid {
				continue
			}
			dest := d.chase(p)
			if !d.marked[dest] && !d.marked[path.Base(dest)] && !d.marked[e.Name()] {
				continue
			}
			d.gone[p] = false
			d.rmdirParents(p)
			if !d.marked[p] {
				d.marked[p] = true
				*restart = true
			}
		}
	}
	return nil
}

// rmdirParents removes the directories above p that are left empty, up to
// SystemDir (which stays).
func (d *disabler) rmdirParents(p string) {
	for dir := path.Dir(p); dir != SystemDir && strings.HasPrefix(dir, SystemDir+"/"); dir = path.Dir(dir) {
		entries, err := fs.ReadDir(d.fsys, rel(dir))
		if err != nil {
			return
		}
		for _, e := range entries {
			if _, ok := d.gone[dir+"/"+e.Name()]; !ok {
				return
			}
		}
		d.gone[dir] = true
	}
}

// chase resolves symlinks in node path p inside the tree, component by
// component (absolute targets against the root); removed paths count as
// missing, and from the first missing component on the rest is kept as
// written (chase_symlinks with CHASE_NONEXISTENT).
func (d *disabler) chase(p string) string {
	todo := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	done := "/"
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, c)
		if _, ok := d.gone[next]; ok {
			return path.Join(append([]string{next}, todo...)...)
		}
		fi, err := lstat(d.fsys, next)
		if err != nil {
			return path.Join(append([]string{next}, todo...)...)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		if hops++; hops > maxSymlinks {
			return path.Join(append([]string{next}, todo...)...)
		}
		t, err := fs.ReadLink(d.fsys, rel(next))
		if err != nil {
			return path.Join(append([]string{next}, todo...)...)
		}
		if path.IsAbs(t) {
			done = "/"
		}
		todo = append(strings.Split(t, "/"), todo...)
	}
	return done
}
