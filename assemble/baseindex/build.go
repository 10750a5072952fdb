package baseindex

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Options tune Build. The zero value is fine.
type Options struct {
	// Jobs is how many layers stream at once (0: DefaultJobs). Layers are applied in
	// order whatever the order they arrive in.
	Jobs int
	// Progress, if set, is called after each layer is applied with the
	// layer's position (1-based), the layer count and the compressed bytes
	// read so far.
	Progress func(layer, layers int, bytesRead int64)
	// Parent, if set, is the index of an image whose layers are the first
	// layers of the image indexed (a package base built on the official
	// base): Build starts from its tree and reads only the layers after
	// them. A parent whose layers are not such a prefix is ignored. The
	// parent's tree has no ostree object store, so a later layer that
	// hardlinks into it fails (Resolver then reads every layer).
	Parent *Index
}

// DefaultJobs is Options.Jobs when unset (a build reads as many as its
// registry requests go at once, registry.Options.Requests): a rechunked base has hundreds
// of small layers, and across a WAN reading one is mostly waiting for the
// registry's answer, so many go at once. The layers read ahead of the one
// being applied are bounded by it too.
const DefaultJobs = 16

// Stats say what Build read.
type Stats struct {
	// BytesRead counts the compressed layer bytes read.
	BytesRead int64
	// Layers is the number of layers read.
	Layers int
	// Retries counts layers read a second time after an error that was
	// not a digest or size mismatch (a connection broken mid-layer).
	Retries int
}

// ostreeStore is the ostree object store an ostree-ext tar stream carries
// next to the checkout (sysroot/ostree/repo/objects, .../xattrs): its files
// are the targets of the checkout's hardlinks (also from a later layer), not
// part of the deployed tree. They are kept while layers are applied and left
// out of the index.
var ostreeStore = []string{"sysroot/ostree/repo/objects/", "sysroot/ostree/repo/xattrs/"}

func inOstreeStore(p string) bool {
	for _, s := range ostreeStore {
		if strings.HasPrefix(p, s) {
			return true
		}
	}
	return false
}

// Hardlink sources: an ostree-ext layer writes each file object, then the
// checkout paths as hardlinks to it (a chunked layer right after the object,
// a single-layer export wherever the path is), so the content of the last
// small files is kept for the hardlinks that follow. The window is bounded;
// a recorded path hardlinked to a file that left it keeps its metadata only
// (reading it fails with ErrNotIndexed).
const (
	recentMaxFile  = 64 << 10
	recentMaxBytes = 8 << 20
	recentMaxFiles = 4096
)

// Build reads every layer of img once and returns its index. Each layer's
// compressed bytes are checked against the manifest's digest (and size)
// while they stream; a mismatch is an error naming the layer. Nothing is
// written to disk.
func Build(ctx context.Context, img v1.Image, opts Options) (*Index, Stats, error) {
	var st Stats
	base, m, ls, err := layersOf(img)
	if err != nil {
		return nil, st, err
	}
	jobs := opts.Jobs
	if jobs <= 0 {
		jobs = DefaultJobs
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := len(ls)
	skip := parentLayers(opts.Parent, m)
	lr := &layerReader{base: base, m: m, ls: ls, results: make([]chan layerResult, n), slots: make(chan struct{}, jobs)}
	for i := range lr.results {
		lr.results[i] = make(chan layerResult, 1)
	}
	go lr.start(ctx, skip)
	t := newTree()
	if skip > 0 {
		// The parent's layers are taken from its tree: never read.
		for i := range opts.Parent.Entries {
			e := opts.Parent.Entries[i]
			t.m[e.Path] = &e
		}
	}
	firstErr := lr.apply(t, skip, cancel, opts.Progress)
	lr.wg.Wait()
	st.BytesRead, st.Layers, st.Retries = lr.read.Load(), n-skip, int(lr.retries.Load())
	if firstErr != nil {
		return nil, st, firstErr
	}
	ix := &Index{Version: FormatVersion, Base: base, Layers: make([]v1.Hash, n)}
	for i, d := range m.Layers {
		ix.Layers[i] = d.Digest
	}
	ix.Entries, ix.Kernels = t.finish()
	if err := ix.seal(); err != nil {
		return nil, st, err
	}
	return ix, st, nil
}

// layersOf reads img's digest, manifest and layers, and checks that the
// manifest, the config and the layers agree.
func layersOf(img v1.Image) (v1.Hash, *v1.Manifest, []v1.Layer, error) {
	base, err := img.Digest()
	if err != nil {
		return base, nil, nil, fmt.Errorf("base index: %w", err)
	}
	m, err := img.Manifest()
	if err != nil {
		return base, nil, nil, fmt.Errorf("base index of %s: manifest: %w", base, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return base, nil, nil, fmt.Errorf("base index of %s: config: %w", base, err)
	}
	if len(cf.RootFS.DiffIDs) != len(m.Layers) {
		return base, nil, nil, fmt.Errorf("base index of %s: manifest has %d layers but config rootfs.diff_ids has %d", base, len(m.Layers), len(cf.RootFS.DiffIDs))
	}
	ls, err := img.Layers()
	if err != nil {
		return base, nil, nil, fmt.Errorf("base index of %s: layers: %w", base, err)
	}
	if len(ls) != len(m.Layers) {
		return base, nil, nil, fmt.Errorf("base index of %s: %d layers, manifest lists %d", base, len(ls), len(m.Layers))
	}
	return base, m, ls, nil
}

// parentLayers is how many of m's first layers the parent index already
// covers (0 unless they are exactly the parent's layers, in its format).
func parentLayers(p *Index, m *v1.Manifest) int {
	if p == nil || len(p.Layers) > len(m.Layers) || p.Version != FormatVersion {
		return 0
	}
	for i, d := range p.Layers {
		if m.Layers[i].Digest != d {
			return 0
		}
	}
	return len(p.Layers)
}

// layerReader reads layers into change sets in workers; the applier takes
// them in order. At most cap(slots) change sets exist at once (a slot is
// freed when a change set is applied).
type layerReader struct {
	base          v1.Hash
	m             *v1.Manifest
	ls            []v1.Layer
	results       []chan layerResult
	slots         chan struct{}
	read, retries atomic.Int64
	wg            sync.WaitGroup
}

type layerResult struct {
	cs  *changeset
	err error
}

// start reads layers skip.. in workers, each once more from its start
// after a broken connection; a cancelled ctx fails the layers not started.
func (lr *layerReader) start(ctx context.Context, skip int) {
	n := len(lr.ls)
	for i := skip; i < n; i++ {
		select {
		case lr.slots <- struct{}{}:
		case <-ctx.Done():
			for j := i; j < n; j++ {
				lr.results[j] <- layerResult{err: ctx.Err()}
			}
			return
		}
		lr.wg.Add(1)
		go func(i int) {
			defer lr.wg.Done()
			cs, err := readLayer(lr.ls[i], lr.m.Layers[i], &lr.read)
			if err != nil && ctx.Err() == nil && !errors.Is(err, errMismatch) {
				// A broken connection in the middle of a layer: read
				// that layer once more from its start.
				lr.retries.Add(1)
				cs, err = readLayer(lr.ls[i], lr.m.Layers[i], &lr.read)
			}
			if err != nil {
				err = fmt.Errorf("base index of %s: layer %d (%s): %w", lr.base, i, lr.m.Layers[i].Digest, err)
			}
			lr.results[i] <- layerResult{cs, err}
		}(i)
	}
}

// apply applies the change sets to t in layer order and returns the first
// error (after which it cancels the readers and drains the rest).
func (lr *layerReader) apply(t *tree, skip int, cancel func(), progress func(done, total int, bytes int64)) error {
	n := len(lr.ls)
	var firstErr error
	for i := skip; i < n; i++ {
		r := <-lr.results[i]
		<-lr.slots
		if firstErr != nil {
			continue
		}
		if r.err == nil {
			r.err = t.apply(r.cs)
			if r.err != nil {
				r.err = fmt.Errorf("base index of %s: layer %d (%s): %w", lr.base, i, lr.m.Layers[i].Digest, r.err)
			}
		}
		if r.err != nil {
			firstErr = r.err
			cancel()
			continue
		}
		if progress != nil {
			progress(i+1, n, lr.read.Load())
		}
	}
	return firstErr
}

// changeset is one layer: its whiteouts and its entries in tar order.
type changeset struct {
	whiteouts []string // paths removed from lower layers
	opaque    []string // directories whose lower children are removed
	entries   []*Entry // Type "hardlink" (Link = target) resolves against the tree
}

const typeHardlink = "hardlink"

// apply applies one layer onto the tree: whiteouts hide lower layers only,
// then the layer's entries are added in order.
func (t *tree) apply(cs *changeset) error {
	for _, p := range cs.whiteouts {
		t.removeTree(p)
	}
	for _, d := range cs.opaque {
		t.removeChildren(d)
	}
	for _, e := range cs.entries {
		if e.Type == typeHardlink {
			src, ok := t.m[e.Link]
			if !ok || src.Type == TypeDir {
				return fmt.Errorf("%s: hardlink to %s, which the tree does not have as a file", e.Path, e.Link)
			}
			c := *src
			c.Path, c.Content, c.Indexed = e.Path, nil, false
			if ContentPath(e.Path) && src.Indexed {
				c.Content, c.Indexed = src.Content, true
			}
			e = &c
		}
		t.put(e)
	}
	return nil
}

// readLayer streams one layer and returns its change set, verifying its
// digest (the sha256 of the compressed bytes the manifest names). The
// diffID is not hashed again: the uncompressed bytes are a function of the
// verified compressed ones.
func readLayer(l v1.Layer, desc v1.Descriptor, read *atomic.Int64) (*changeset, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	ch := newHasher(desc.Digest)
	cr := &countingReader{r: io.TeeReader(rc, ch.h), n: read}
	br := bufio.NewReaderSize(cr, 1<<16)
	ur, closeU, err := decompress(br)
	if err != nil {
		return nil, err
	}
	defer closeU()
	cs, err := readTar(ur)
	if err != nil {
		return nil, err
	}
	// Read to the end: the decompressor checks its trailer (gzip CRC and
	// size), and the digest covers every compressed byte.
	if _, err := io.Copy(io.Discard, ur); err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return nil, err
	}
	if err := ch.check("digest"); err != nil {
		return nil, err
	}
	if desc.Size > 0 && cr.total != desc.Size {
		return nil, fmt.Errorf("%w: size %d, manifest says %d", errMismatch, cr.total, desc.Size)
	}
	return cs, nil
}

// errMismatch marks a layer whose bytes are not the ones the manifest
// names: reading it again does not help.
var errMismatch = errors.New("mismatch")

type hasher struct {
	want v1.Hash
	h    hash.Hash
}

// newHasher hashes with sha256; check reports any other algorithm.
func newHasher(want v1.Hash) *hasher { return &hasher{want: want, h: sha256.New()} }

func (h *hasher) check(what string) error {
	if h.want.Algorithm != "sha256" {
		return fmt.Errorf("%s %s: unsupported digest algorithm", what, h.want)
	}
	got := hex.EncodeToString(h.h.Sum(nil))
	if got != h.want.Hex {
		return fmt.Errorf("%s %w: content is sha256:%s, expected %s", what, errMismatch, got, h.want)
	}
	return nil
}

type countingReader struct {
	r     io.Reader
	n     *atomic.Int64
	total int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.total += int64(n)
	c.n.Add(int64(n))
	return n, err
}

// decompress sniffs gzip and zstd; anything else is read as a plain tar.
func decompress(br *bufio.Reader) (io.Reader, func(), error) {
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, err
		}
		zr.Multistream(true)
		return zr, func() { zr.Close() }, nil
	case len(magic) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd:
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	}
	return br, func() {}, nil
}

// recent keeps the content of the last small regular files of a layer,
// for the hardlinks that follow them.
type recent struct {
	data  map[string][]byte
	order []string
	bytes int
}

func (r *recent) add(p string, b []byte) {
	if r.data == nil {
		r.data = map[string][]byte{}
	}
	if old, ok := r.data[p]; ok {
		r.bytes -= len(old)
		r.order = slices.DeleteFunc(r.order, func(q string) bool { return q == p })
	}
	r.order = append(r.order, p)
	r.data[p] = b
	r.bytes += len(b)
	for (r.bytes > recentMaxBytes || len(r.order) > recentMaxFiles) && len(r.order) > 0 {
		old := r.order[0]
		r.order = r.order[1:]
		r.bytes -= len(r.data[old])
		delete(r.data, old)
	}
}

// tarReader is the state of reading one layer: its change set, and
// the files, symlinks and small file contents seen so far, for the
// hardlinks that follow them.
type tarReader struct {
	tr    *tar.Reader
	cs    *changeset
	files map[string]*Entry
	rec   recent
}

// readTar reads one layer's tar stream into a change set.
func readTar(r io.Reader) (*changeset, error) {
	lr := &tarReader{tr: tar.NewReader(r), cs: &changeset{}, files: map[string]*Entry{}}
	for {
		h, err := lr.tr.Next()
		if err == io.EOF {
			return lr.cs, nil
		}
		if err != nil {
			return nil, err
		}
		p := cleanRel(h.Name)
		if p == "" || lr.whiteout(p) {
			continue
		}
		e, err := lr.entry(h, p)
		if err != nil {
			return nil, err
		}
		if e != nil {
			lr.cs.entries = append(lr.cs.entries, e)
		}
	}
}

// whiteout records p when it is a whiteout (or opaque marker) and
// reports whether p is no entry of the tree: a whiteout, or one of the
// object store's directories, xattrs and metadata objects, to which no
// checkout path links.
func (lr *tarReader) whiteout(p string) bool {
	if inOstreeStore(p) && !strings.HasSuffix(p, ".file") {
		return true
	}
	dir, name := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	switch {
	case name == ".wh..wh..opq":
		lr.cs.opaque = append(lr.cs.opaque, dir)
		return true
	case strings.HasPrefix(name, ".wh."):
		lr.cs.whiteouts = append(lr.cs.whiteouts, path.Join(dir, strings.TrimPrefix(name, ".wh.")))
		return true
	}
	return false
}

// entry is the tree entry of header h at p (nil for a type that is not
// part of a root tree: extended headers are consumed by archive/tar,
// anything else, e.g. a Solaris-specific type, is skipped).
func (lr *tarReader) entry(h *tar.Header, p string) (*Entry, error) {
	e := &Entry{Path: p, Mode: uint32(h.Mode) & 0o7777, UID: h.Uid, GID: h.Gid}
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		return lr.regular(e, h.Size)
	case tar.TypeDir:
		e.Type = TypeDir
	case tar.TypeSymlink:
		// ostree-ext writes symlink objects too and hardlinks the
		// checkout's symlinks to them.
		e.Type, e.Link = TypeSymlink, h.Linkname
		lr.files[p] = e
	case tar.TypeLink:
		return lr.hardlink(e, cleanRel(h.Linkname)), nil
	case tar.TypeChar:
		e.Type = TypeChar
	case tar.TypeBlock:
		e.Type = TypeBlock
	case tar.TypeFifo:
		e.Type = TypeFifo
	default:
		return nil, nil
	}
	return e, nil
}

// regular reads a regular file of size bytes: its content when indexed
// (a content path up to MaxContent), kept for later hardlinks when small.
func (lr *tarReader) regular(e *Entry, size int64) (*Entry, error) {
	p := e.Path
	e.Type, e.Size = TypeFile, size
	if size < 0 {
		return nil, fmt.Errorf("%s: negative size", p)
	}
	indexed := ContentPath(p) && size <= MaxContent
	keep := size <= recentMaxFile
	if indexed || keep {
		buf := make([]byte, size)
		if _, err := io.ReadFull(lr.tr, buf); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if indexed {
			e.Content, e.Indexed = buf, true
		}
		if keep {
			lr.rec.add(p, buf)
		}
	}
	lr.files[p] = e
	return e, nil
}

// hardlink is e, a hardlink to target: a copy of target's entry when
// this layer has it (with its content when e is indexed), else a
// hardlink resolved when the layer is applied (a file of a lower layer).
func (lr *tarReader) hardlink(e *Entry, target string) *Entry {
	src, ok := lr.files[target]
	if !ok {
		e.Type, e.Link = typeHardlink, target
		return e
	}
	c := *src
	c.Path, c.Content, c.Indexed = e.Path, nil, false
	if ContentPath(e.Path) && src.Size <= MaxContent {
		if src.Indexed {
			c.Content, c.Indexed = src.Content, true
		} else if data, ok := lr.rec.data[target]; ok {
			c.Content, c.Indexed = data, true
		}
	}
	lr.files[e.Path] = &c
	return &c
}
