// Package tree is the in-memory file tree a layer is made of: regular files
// (data, permission bits including setuid/setgid/sticky, numeric owner),
// directories, symbolic links and hard links.
//
// A whiteout entry removes a path of the layers below (an OCI ".wh." file in
// the tar; see package tarball).
//
// A Tree enforces the rules an ostree-native layer must follow:
//
//   - paths are absolute, clean, valid UTF-8, without NUL and without "..";
//   - only directories, regular files, symlinks and hard links exist, owners
//     are numeric;
//   - a hard link points to a regular file added earlier with the same Layer
//     tag (tar: "an earlier entry of the same layer");
//   - parent directories are created implicitly (0755, root:root) unless the
//     caller adds them explicitly, before or after their children;
//   - adding a different entry at a path that already holds one is an error
//     naming both origins; adding an identical entry again is a no-op.
//
// Entries come out sorted component by component, so parents always precede
// their children, and hard links come last; package tarball writes them in
// that order.
package tree

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode/utf8"
)

// Kind is the type of an entry.
type Kind uint8

// Entry kinds.
const (
	File Kind = iota + 1
	Dir
	Symlink
	Hardlink
	// Whiteout removes Path (and everything below it) from the layers
	// below; it has no mode, owner, data or target.
	Whiteout
)

func (k Kind) String() string {
	switch k {
	case File:
		return "file"
	case Dir:
		return "dir"
	case Symlink:
		return "symlink"
	case Hardlink:
		return "hardlink"
	case Whiteout:
		return "whiteout"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// MaxModeBits are the mode bits an entry may carry: permissions plus setuid,
// setgid and sticky.
const MaxModeBits = 0o7777

// Entry is one node of the tree.
type Entry struct {
	// Path is absolute and clean, e.g. "/etc/sysctl.d/99-k8s.conf".
	Path string
	Kind Kind
	// Mode holds permission bits incl. setuid/setgid/sticky (07777).
	Mode uint32
	UID  int
	GID  int
	// Data is a regular file's content. The tree keeps the slice given to
	// Add; callers must not modify it afterwards.
	Data []byte
	// Target is a symlink's target (verbatim), or a hard link's absolute
	// target path.
	Target string
	// Origin names where the entry came from, for error messages and reports.
	Origin string
	// Layer is a free-form tag the caller uses to split a tree into layers
	// (see Select). Implicit parents carry no tag.
	Layer string
	// Implicit marks a directory created only because a child needed it.
	Implicit bool
}

// Tree is a set of entries keyed by path. The zero value is not usable; call New.
type Tree struct {
	m map[string]*Entry
}

// New returns an empty tree.
func New() *Tree { return &Tree{m: map[string]*Entry{}} }

// Len is the number of entries, implicit parents included.
func (t *Tree) Len() int { return len(t.m) }

// Get returns the entry at p.
func (t *Tree) Get(p string) (*Entry, bool) {
	e, ok := t.m[p]
	return e, ok
}

// CheckPath reports whether p is a path a layer may contain: absolute, clean,
// not "/", valid UTF-8, no NUL, no "..", no empty or "." components.
func CheckPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("path %q contains a NUL byte", p)
	case !utf8.ValidString(p):
		return fmt.Errorf("path %q is not valid UTF-8", p)
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is not absolute", p)
	case p == "/":
		return fmt.Errorf("path %q is the root directory", p)
	}
	for _, c := range strings.Split(p[1:], "/") {
		if c == ".." {
			return fmt.Errorf("path %q contains \"..\"", p)
		}
	}
	if path.Clean(p) != p {
		return fmt.Errorf("path %q is not clean (want %q)", p, path.Clean(p))
	}
	return nil
}

// checkTarget validates a symlink target: non-empty, valid UTF-8, no NUL.
func checkTarget(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("empty symlink target")
	case strings.IndexByte(t, 0) >= 0:
		return fmt.Errorf("symlink target %q contains a NUL byte", t)
	case !utf8.ValidString(t):
		return fmt.Errorf("symlink target %q is not valid UTF-8", t)
	}
	return nil
}

func origin(o string) string {
	if o == "" {
		return "(unknown source)"
	}
	return o
}

// Add inserts e (copied; Data is kept by reference). It creates missing parent
// directories and rejects invalid paths, unknown kinds, conflicting entries
// and hard links that do not point to an earlier regular file of the same
// layer. Errors name the path and the origins involved.
func (t *Tree) Add(e Entry) error {
	if err := t.check(&e); err != nil {
		return err
	}
	e.Implicit = false
	if old, ok := t.m[e.Path]; ok {
		return t.again(old, e)
	}
	// Check parents before changing anything.
	var missing []string
	for p := path.Dir(e.Path); p != "/"; p = path.Dir(p) {
		pe, ok := t.m[p]
		if !ok {
			missing = append(missing, p)
			continue
		}
		if pe.Kind != Dir {
			return fmt.Errorf("%s: %s: conflict: its parent %s is a %s from %s", origin(e.Origin), e.Path, p, pe.Kind, origin(pe.Origin))
		}
	}
	for _, p := range missing {
		t.m[p] = &Entry{Path: p, Kind: Dir, Mode: 0o755, Implicit: true, Origin: "parent of " + e.Path + " (" + origin(e.Origin) + ")"}
	}
	ne := e
	t.m[e.Path] = &ne
	return nil
}

// again adds e where old is already: an implicit parent directory becomes
// e when e is a directory; the same entry again is a no-op; anything else
// is a conflict.
func (t *Tree) again(old *Entry, e Entry) error {
	switch {
	case old.Implicit && e.Kind == Dir:
		t.m[e.Path] = &e
		return nil
	case old.Implicit:
		return fmt.Errorf("%s: %s: conflict: %s adds a %s where %s needs a directory", origin(e.Origin), e.Path, origin(e.Origin), e.Kind, origin(old.Origin))
	case same(old, &e):
		return nil
	}
	return fmt.Errorf("%s: conflict: %s and %s both add it, differently (%s)", e.Path, origin(old.Origin), origin(e.Origin), diff(old, &e))
}

// check validates e on its own: its path, mode and owner, and what its
// kind allows (checkKind).
func (t *Tree) check(e *Entry) error {
	if err := CheckPath(e.Path); err != nil {
		return fmt.Errorf("%s: %w", origin(e.Origin), err)
	}
	if e.Mode&^MaxModeBits != 0 {
		return fmt.Errorf("%s: %s: mode %#o has bits outside 07777", origin(e.Origin), e.Path, e.Mode)
	}
	if e.UID < 0 || e.GID < 0 {
		return fmt.Errorf("%s: %s: negative uid/gid %d:%d", origin(e.Origin), e.Path, e.UID, e.GID)
	}
	if err := t.checkKind(e); err != nil {
		return fmt.Errorf("%s: %s: %w", origin(e.Origin), e.Path, err)
	}
	return nil
}

// checkKind says what is wrong with e for its kind (nil when nothing): only
// a file has data, only links a target, a hard link points to an earlier
// regular file of the same layer, a whiteout has nothing but its path.
func (t *Tree) checkKind(e *Entry) error {
	switch e.Kind {
	case File:
		if e.Target != "" {
			return errors.New("a regular file has no target")
		}
	case Dir:
		if e.Target != "" || len(e.Data) != 0 {
			return errors.New("a directory has no data or target")
		}
	case Symlink:
		if err := checkTarget(e.Target); err != nil {
			return err
		}
		if len(e.Data) != 0 {
			return errors.New("a symlink has no data")
		}
	case Hardlink:
		if err := t.checkHardlink(e); err != nil {
			return err
		}
		if len(e.Data) != 0 {
			return errors.New("a hard link has no data")
		}
	case Whiteout:
		if e.Target != "" || len(e.Data) != 0 || e.Mode != 0 || e.UID != 0 || e.GID != 0 {
			return errors.New("a whiteout has no data, target, mode or owner")
		}
	default:
		return fmt.Errorf("unsupported entry type %v", e.Kind)
	}
	return nil
}

// checkHardlink checks a hard link's target.
func (t *Tree) checkHardlink(e *Entry) error {
	if err := CheckPath(e.Target); err != nil {
		return fmt.Errorf("hard link target: %w", err)
	}
	tg, ok := t.m[e.Target]
	switch {
	case !ok:
		return fmt.Errorf("hard link target %s is not an earlier entry of the layer", e.Target)
	case tg.Kind != File:
		return fmt.Errorf("hard link target %s is a %s (from %s), not a regular file", e.Target, tg.Kind, origin(tg.Origin))
	case tg.Layer != e.Layer:
		return fmt.Errorf("hard link target %s is in layer %q, not %q", e.Target, tg.Layer, e.Layer)
	}
	return nil
}

func same(a, b *Entry) bool {
	return a.Kind == b.Kind && a.Mode == b.Mode && a.UID == b.UID && a.GID == b.GID &&
		a.Target == b.Target && bytes.Equal(a.Data, b.Data) && a.Layer == b.Layer
}

func diff(a, b *Entry) string {
	var d []string
	if a.Kind != b.Kind {
		d = append(d, fmt.Sprintf("%s vs %s", a.Kind, b.Kind))
	}
	if a.Mode != b.Mode {
		d = append(d, fmt.Sprintf("mode %#o vs %#o", a.Mode, b.Mode))
	}
	if a.UID != b.UID || a.GID != b.GID {
		d = append(d, fmt.Sprintf("owner %d:%d vs %d:%d", a.UID, a.GID, b.UID, b.GID))
	}
	if a.Target != b.Target {
		d = append(d, fmt.Sprintf("target %q vs %q", a.Target, b.Target))
	}
	if !bytes.Equal(a.Data, b.Data) {
		d = append(d, "content differs")
	}
	if a.Layer != b.Layer {
		d = append(d, fmt.Sprintf("layer %q vs %q", a.Layer, b.Layer))
	}
	return strings.Join(d, ", ")
}

// Remove deletes the entry at p, which must not be a directory with
// entries below it, and then the implicit parent directories that are left
// without entries. Removing a path that has no entry is a no-op.
func (t *Tree) Remove(p string) error {
	e, ok := t.m[p]
	if !ok {
		return nil
	}
	if e.Kind == Dir && t.hasChildren(p) {
		return fmt.Errorf("%s: cannot remove a directory with entries below it", p)
	}
	if e.Kind == File {
		for _, o := range t.m {
			if o.Kind == Hardlink && o.Target == p {
				return fmt.Errorf("%s: cannot remove: hard link %s points to it", p, o.Path)
			}
		}
	}
	delete(t.m, p)
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		pe, ok := t.m[d]
		if !ok || !pe.Implicit || t.hasChildren(d) {
			break
		}
		delete(t.m, d)
	}
	return nil
}

// hasChildren reports whether some entry lies below directory p.
func (t *Tree) hasChildren(p string) bool {
	prefix := p + "/"
	for q := range t.m {
		if strings.HasPrefix(q, prefix) {
			return true
		}
	}
	return false
}

// Less orders paths component by component ("/a/b" < "/a/b/c" < "/a/b-c"),
// which puts every directory before its children.
func Less(a, b string) bool {
	for {
		ai := strings.IndexByte(a, '/')
		bi := strings.IndexByte(b, '/')
		ac, bc := a, b
		if ai >= 0 {
			ac = a[:ai]
		}
		if bi >= 0 {
			bc = b[:bi]
		}
		if ac != bc {
			return ac < bc
		}
		if ai < 0 || bi < 0 {
			return ai < 0 && bi >= 0
		}
		a, b = a[ai+1:], b[bi+1:]
	}
}

// Entries returns every entry in write order: sorted component by component
// (parents before children), hard links after everything else. The entries
// are the tree's own; do not modify them.
func (t *Tree) Entries() []*Entry {
	out := make([]*Entry, 0, len(t.m))
	for _, e := range t.m {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		hi, hj := out[i].Kind == Hardlink, out[j].Kind == Hardlink
		if hi != hj {
			return hj
		}
		return Less(out[i].Path, out[j].Path)
	})
	return out
}

// Select returns a new tree with the entries keep accepts and all their
// parent directories (explicit parents keep their attributes). A hard link
// whose target is not selected is an error.
func (t *Tree) Select(keep func(*Entry) bool) (*Tree, error) {
	n := New()
	for _, e := range t.m {
		if e.Implicit || !keep(e) {
			continue
		}
		ne := *e
		n.m[e.Path] = &ne
		for p := path.Dir(e.Path); p != "/"; p = path.Dir(p) {
			if _, ok := n.m[p]; ok {
				continue
			}
			pe := *t.m[p]
			n.m[p] = &pe
		}
	}
	// A parent that was selected via a child only stays a plain copy; mark
	// implicit-ness as in t (already copied). Check hard links.
	for _, e := range n.m {
		if e.Kind != Hardlink {
			continue
		}
		if _, ok := n.m[e.Target]; !ok {
			return nil, fmt.Errorf("%s: %s: hard link target %s is not in the same layer", origin(e.Origin), e.Path, e.Target)
		}
	}
	return n, nil
}
