// Package baseindex reads an ostree-native base image once and keeps what
// rendering needs to know about it: a base index.
//
// Build streams every layer of a base image exactly once (each layer's
// digest is verified while it streams; nothing is
// kept on disk and memory stays bounded by the metadata), applies the layers
// bottom-up with whiteouts and opaque whiteouts as a container runtime does,
// and records for every path of the resulting root tree its type, mode,
// owner, size and link target, plus the content of the small files that
// rendering reads (ContentPath): systemd units and drop-ins, enablement
// links, presets, passwd/group, os-release, bootc kargs.d, sysusers.d.
//
// An Index is serialised as deterministic gzip-compressed JSON with a
// format version (Marshal, Unmarshal), cached on disk keyed by the base
// manifest digest (Cache), and published next to the images as an OCI
// artifact tagged "sha256-<hex>.baseindex" in the target repository
// (Publish, Fetch), so every build on one base shares one read. A cached
// index is used only if its recorded base digest and its own content digest
// match (Unmarshal checks both).
//
// (*Index).FS is the index's view of the root tree as an fs.FS (also
// fs.ReadLinkFS, fs.StatFS and fs.ReadDirFS): recorded files have their
// content, every other regular file is metadata only and reads fail with
// ErrNotIndexed. It is what layers.Request.Base receives.
package baseindex

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/render/systemd"
)

// FormatVersion is the version of the serialised index. An index of
// another version is not used (it is rebuilt).
const FormatVersion = 1

// MaxContent bounds the content recorded for one file; a bigger file of a
// recorded kind is kept as metadata only.
const MaxContent = 1 << 20

// ErrNotIndexed is returned when reading a file whose content the index
// does not record (only its metadata).
var ErrNotIndexed = errors.New("content not indexed")

// Entry types.
const (
	TypeDir     = "dir"
	TypeFile    = "file"
	TypeSymlink = "symlink"
	TypeChar    = "char"
	TypeBlock   = "block"
	TypeFifo    = "fifo"
)

// Entry is one path of the base's root tree.
type Entry struct {
	// Path is relative to the root, without a leading slash
	// ("etc/passwd").
	Path string `json:"path"`
	Type string `json:"type"`
	// Mode holds the permission bits plus setuid, setgid and sticky
	// (07777).
	Mode uint32 `json:"mode"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	// Size is the size of a regular file.
	Size int64 `json:"size,omitempty"`
	// Link is a symlink's target.
	Link string `json:"link,omitempty"`
	// Indexed reports that Content is the file's content.
	Indexed bool   `json:"indexed,omitempty"`
	Content []byte `json:"content,omitempty"`
}

// Index is what rendering knows about one base image.
type Index struct {
	// Version is FormatVersion.
	Version int `json:"version"`
	// Base is the manifest digest of the base image the index was made from.
	Base v1.Hash `json:"base"`
	// Layers are the layer digests read, bottom first.
	Layers []v1.Hash `json:"layers"`
	// Kernels are the kernel versions (directories of usr/lib/modules).
	Kernels []string `json:"kernels"`
	// Entries are every path of the root tree, sorted by path.
	Entries []Entry `json:"entries"`
	// Digest is the sha256 of the index's JSON encoding with Digest empty:
	// the index's own digest.
	Digest string `json:"digest"`

	once   sync.Once
	byPath map[string]int
	view   *FS
}

// contentDirs are directories whose regular files are recorded with their
// content (relative to the root): the unit directories layers/systemd
// searches (and usr/etc's copy of etc's), presets, bootc kargs.d and
// sysusers.d.
var contentDirs = func() []string {
	var ds []string
	for _, d := range systemd.UnitDirs() {
		ds = append(ds, strings.TrimPrefix(d, "/")+"/")
	}
	return append(ds,
		"usr/etc/systemd/system/",
		"usr/lib/systemd/system-preset/",
		"etc/systemd/system-preset/",
		"usr/etc/systemd/system-preset/",
		"usr/lib/bootc/kargs.d/",
		"usr/lib/sysusers.d/",
	)
}()

// contentFiles are single files recorded with their content.
var contentFiles = map[string]bool{
	"etc/passwd": true, "etc/group": true,
	"usr/lib/passwd": true, "usr/lib/group": true,
	"usr/etc/passwd": true, "usr/etc/group": true,
	"etc/os-release": true, "usr/lib/os-release": true, "usr/etc/os-release": true,
}

// ContentPath reports whether the index records the content of the regular
// file at p (relative to the root).
func ContentPath(p string) bool {
	if contentFiles[p] {
		return true
	}
	for _, d := range contentDirs {
		if strings.HasPrefix(p, d) && len(p) > len(d) {
			return true
		}
	}
	return false
}

// Lookup returns the entry at p (relative to the root; symlinks are not
// followed).
func (ix *Index) Lookup(p string) (Entry, bool) {
	ix.init()
	i, ok := ix.byPath[cleanRel(p)]
	if !ok {
		return Entry{}, false
	}
	return ix.Entries[i], true
}

// init builds the lookup tables once; an Index is not changed after
// Build or Unmarshal returns it, so they stay valid.
func (ix *Index) init() {
	ix.once.Do(func() {
		ix.byPath = make(map[string]int, len(ix.Entries))
		for i, e := range ix.Entries {
			ix.byPath[e.Path] = i
		}
		ix.view = newFS(ix)
	})
}

// OSRelease returns the base's os-release (etc/os-release, falling back to
// usr/lib/os-release, as systemd reads it) as key/value pairs; nil if
// neither is indexed.
func (ix *Index) OSRelease() map[string]string {
	fsys := ix.FS()
	for _, p := range []string{"etc/os-release", "usr/lib/os-release"} {
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			continue
		}
		m := map[string]string{}
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.HasPrefix(line, "#") {
				continue
			}
			if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
				v = v[1 : len(v)-1]
			}
			m[k] = v
		}
		return m
	}
	return nil
}

// canonical returns the JSON encoding of ix with Digest empty.
func (ix *Index) canonical() ([]byte, error) {
	d := ix.Digest
	ix.Digest = ""
	defer func() { ix.Digest = d }()
	return json.Marshal(ix)
}

// seal sets Digest.
func (ix *Index) seal() error {
	b, err := ix.canonical()
	if err != nil {
		return err
	}
	s := sha256.Sum256(b)
	ix.Digest = "sha256:" + hex.EncodeToString(s[:])
	return nil
}

// Marshal returns the deterministic gzip-compressed JSON of ix.
func (ix *Index) Marshal() ([]byte, error) {
	if ix.Digest == "" {
		if err := ix.seal(); err != nil {
			return nil, err
		}
	}
	raw, err := json.Marshal(ix)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// maxIndex bounds the uncompressed JSON of an index read back (256 MiB,
// far more than the metadata of an OS tree of a few hundred thousand paths).
const maxIndex = 256 << 20

var knownType = map[string]bool{TypeDir: true, TypeFile: true, TypeSymlink: true, TypeChar: true, TypeBlock: true, TypeFifo: true}

// Unmarshal decodes an index written by Marshal and checks it: its format
// version, that it was made from base (unless base is the zero Hash), that
// its own digest matches its content, and that its entries are sorted and
// unique, with clean relative paths and known types. Any mismatch is an
// error (the caller rebuilds the index).
func Unmarshal(data []byte, base v1.Hash) (*Index, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("base index: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxIndex+1))
	if err != nil {
		return nil, fmt.Errorf("base index: %w", err)
	}
	if len(raw) > maxIndex {
		return nil, fmt.Errorf("base index: larger than %d bytes", maxIndex)
	}
	var ix Index
	if err := json.Unmarshal(raw, &ix); err != nil {
		return nil, fmt.Errorf("base index: %w", err)
	}
	if ix.Version != FormatVersion {
		return nil, fmt.Errorf("base index: format version %d, want %d", ix.Version, FormatVersion)
	}
	if base != (v1.Hash{}) && ix.Base != base {
		return nil, fmt.Errorf("base index: made from base %s, want %s", ix.Base, base)
	}
	want := ix.Digest
	if err := ix.seal(); err != nil {
		return nil, fmt.Errorf("base index: %w", err)
	}
	if ix.Digest != want {
		return nil, fmt.Errorf("base index of %s: recorded digest %q does not match its content (%s)", ix.Base, want, ix.Digest)
	}
	for i, e := range ix.Entries {
		if i > 0 && ix.Entries[i-1].Path >= e.Path {
			return nil, fmt.Errorf("base index of %s: entries not sorted at %q", ix.Base, e.Path)
		}
		if e.Path == "" || !fs.ValidPath(e.Path) || cleanRel(e.Path) != e.Path || !knownType[e.Type] {
			return nil, fmt.Errorf("base index of %s: invalid entry %q (type %q)", ix.Base, e.Path, e.Type)
		}
	}
	return &ix, nil
}

// builder accumulates the root tree while layers are applied.
type tree struct {
	m map[string]*Entry
}

func newTree() *tree { return &tree{m: map[string]*Entry{}} }

// removeTree removes p and everything under it.
func (t *tree) removeTree(p string) {
	e, ok := t.m[p]
	delete(t.m, p)
	if ok && e.Type != TypeDir {
		return
	}
	t.removeChildren(p)
}

// removeChildren removes everything under directory p ("" is the root).
func (t *tree) removeChildren(p string) {
	prefix := p + "/"
	if p == "" {
		prefix = ""
	}
	for k := range t.m {
		if strings.HasPrefix(k, prefix) && k != p {
			delete(t.m, k)
		}
	}
}

// ensureParents creates missing parent directories of p (0755 root:root),
// as a runtime does when a layer names a path without its parents.
func (t *tree) ensureParents(p string) {
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		if e, ok := t.m[d]; ok {
			if e.Type == TypeDir {
				return
			}
			// A non-directory in the way is replaced by a directory.
		}
		t.m[d] = &Entry{Path: d, Type: TypeDir, Mode: 0o755}
	}
}

// put adds e, replacing what was at its path (a directory replaced by a
// non-directory loses its children; a directory over a directory keeps
// them).
func (t *tree) put(e *Entry) {
	if old, ok := t.m[e.Path]; ok && old.Type == TypeDir && e.Type != TypeDir {
		t.removeChildren(e.Path)
	}
	t.ensureParents(e.Path)
	t.m[e.Path] = e
}

// finish returns the sorted entries and kernel versions.
func (t *tree) finish() ([]Entry, []string) {
	keys := make([]string, 0, len(t.m))
	for k := range t.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Entry, 0, len(keys))
	kernels := []string{}
	for _, k := range keys {
		if inOstreeStore(k) {
			continue
		}
		e := *t.m[k]
		out = append(out, e)
		if d, name := path.Split(k); d == "usr/lib/modules/" && e.Type == TypeDir {
			kernels = append(kernels, name)
		}
	}
	slices.Sort(kernels)
	return out, kernels
}

// cleanRel turns a tar or fs path into the index's form: relative, clean,
// "" for the root.
func cleanRel(p string) string {
	p = path.Clean("/" + strings.TrimPrefix(p, "./"))
	return strings.TrimPrefix(p, "/")
}
