// Package imageref reads single files out of container images, for Gardener
// imageRef files. It implements model.ImageFiles with go-containerregistry.
//
// A reference is resolved through registry.Options (mirrors, credentials,
// OCI layouts; linux/amd64 from an index). The file is what a container
// runtime unpacking the image would put at the path (see find):
//
//   - within a layer, the last tar entry for a path wins;
//   - a parent directory replaced by a symbolic link or a file in an upper
//     layer hides everything below it in lower layers;
//   - a whiteout (".wh.NAME" for the path or a parent) and an opaque
//     directory (".wh..wh..opq" in a parent) hide lower layers.
//
// A regular file (or a hard link to one earlier in the same layer) is
// returned; a symbolic link, a directory or a device is refused, and so is
// a path below a parent that became a symbolic link.
//
// Hostile images cannot exhaust the machine: the content is streamed into an
// unlinked temporary file (never buffered in memory) and mapped from there;
// one budget bounds the bytes of all files one Reader returns (WithBudget),
// a deadline bounds the time of all its reads (WithTimeout); sparse tar
// entries for the file are refused, and so is a layer that expands more
// than MaxExpansion times its compressed size (a decompression bomb).
//
// Results are cached by image digest and path; resolved references are
// cached by reference string for the Reader's lifetime. A Reader is safe for
// concurrent use.
package imageref

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/zstd"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/sources/model"
)

// ErrNotFound is returned (wrapped) when the image has no such file.
var ErrNotFound = errors.New("file not found in image")

// ErrRefused is returned (wrapped) for content refused as hostile or over a
// bound: a sparse entry, a decompression bomb, an exhausted budget, a read
// past the deadline.
var ErrRefused = errors.New("refused")

const (
	// DefaultBudget bounds the bytes of all imageRef files one Reader (one
	// build or render) returns.
	DefaultBudget = 1 << 30 // 1 GiB
	// DefaultTimeout bounds the time all reads of one Reader take,
	// counted from the first.
	DefaultTimeout = 10 * time.Minute
	// MaxExpansion is how many times its compressed size a layer may
	// expand to once it has produced bombFloor bytes: real layers expand
	// 2 to 10 times, gzip of zeros about 1000 times.
	MaxExpansion = 100
	bombFloor    = 64 << 20
)

// Option configures a Reader.
type Option func(*Reader)

// WithLogger logs image resolution and layer scans at debug level.
func WithLogger(l *slog.Logger) Option { return func(r *Reader) { r.log = l } }

// WithMaxSize bounds the size of one file read (default
// model.MaxImageFileSize).
func WithMaxSize(n int64) Option { return func(r *Reader) { r.max = n } }

// WithBudget bounds the total bytes of all files the Reader returns
// (default DefaultBudget). A file read twice (same image digest and path)
// counts once.
func WithBudget(n int64) Option { return func(r *Reader) { r.budget = n } }

// WithTimeout bounds the time of all reads, counted from the first
// (default DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(r *Reader) { r.timeout = d } }

// WithTempDir sets where content is streamed (default os.TempDir()). The
// files are unlinked as soon as they are created.
func WithTempDir(dir string) Option { return func(r *Reader) { r.tmpDir = dir } }

// WithPlatform selects the platform in multi-platform images (default
// linux/amd64).
func WithPlatform(p v1.Platform) Option { return func(r *Reader) { r.platform = &p } }

// Reader reads files from images. It implements model.ImageFiles.
type Reader struct {
	reg      *registry.Options
	log      *slog.Logger
	max      int64
	budget   int64
	timeout  time.Duration
	deadline time.Time // set by the first read (under mu)
	tmpDir   string
	platform *v1.Platform

	mu     sync.Mutex
	used   int64
	maps   [][]byte               // content mappings, released by Close
	images map[string]*imageEntry // by reference as given
	files  map[string]*fileEntry  // by digest + "\x00" + path
}

type imageEntry struct {
	once sync.Once
	img  v1.Image
	res  registry.Resolved
	err  error
}

type fileEntry struct {
	once sync.Once
	data []byte
	mode uint32
	err  error
}

var _ model.ImageFiles = (*Reader)(nil)

// New returns a Reader that reaches images through reg (nil: zero Options).
func New(reg *registry.Options, opts ...Option) *Reader {
	if reg == nil {
		reg = &registry.Options{}
	}
	r := &Reader{
		reg:     reg,
		max:     model.MaxImageFileSize,
		budget:  DefaultBudget,
		timeout: DefaultTimeout,
		images:  map[string]*imageEntry{},
		files:   map[string]*fileEntry{},
	}
	for _, o := range opts {
		o(r)
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r
}

// Close releases the content of every file the Reader returned (the
// mappings of their unlinked temporary files) and empties its caches. The
// data returned before must not be used after Close; a process that reads
// once and exits (the CLI) need not call it, a long-running one must.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, m := range r.maps {
		errs = append(errs, syscall.Munmap(m))
	}
	r.maps = nil
	r.images = map[string]*imageEntry{}
	r.files = map[string]*fileEntry{}
	return errors.Join(errs...)
}

// Used returns the bytes of content returned so far (charged against the
// budget).
func (r *Reader) Used() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.used
}

// ReadFile returns the content and mode of file p inside image, and the
// image reference pinned by digest. The content must not be modified.
func (r *Reader) ReadFile(ctx context.Context, image, p string) ([]byte, uint32, string, error) {
	want, err := cleanPath(p)
	if err != nil {
		return nil, 0, "", model.MarkInput(fmt.Errorf("image %s: %v", image, err))
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, "", err
	}
	caller := ctx
	deadline := r.start()
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	r.mu.Lock()
	ie, ok := r.images[image]
	if !ok {
		ie = &imageEntry{}
		r.images[image] = ie
	}
	r.mu.Unlock()
	ie.once.Do(func() {
		// The image reads its layers later with the context it was
		// resolved with: one that ends with this caller's context or at
		// the deadline, not when this call returns.
		ictx, cancel := context.WithCancel(context.WithoutCancel(caller))
		if !deadline.IsZero() {
			ictx, cancel = context.WithDeadline(ictx, deadline)
		}
		context.AfterFunc(caller, cancel)
		ie.img, ie.res, ie.err = r.reg.Image(ictx, image, r.platform)
		if ie.err == nil {
			r.log.Debug("resolved image", "image", image, "pinned", ie.res.Digested())
		}
	})
	if ie.err != nil {
		// Do not cache failures caused by a cancelled context.
		if ctx.Err() != nil {
			r.mu.Lock()
			delete(r.images, image)
			r.mu.Unlock()
		}
		return nil, 0, "", r.explain(ctx, ie.err)
	}
	pinned := ie.res.Digested()
	key := ie.res.Digest.String() + "\x00" + want
	r.mu.Lock()
	fe, ok := r.files[key]
	if !ok {
		fe = &fileEntry{}
		r.files[key] = fe
	}
	r.mu.Unlock()
	fe.once.Do(func() {
		fe.data, fe.mode, fe.err = r.find(ctx, ie.img, want)
	})
	if fe.err != nil {
		if ctx.Err() != nil {
			r.mu.Lock()
			delete(r.files, key)
			delete(r.images, image)
			r.mu.Unlock()
		}
		err := fmt.Errorf("image %s (%s): %s: %w", image, pinned, p, r.explain(ctx, fe.err))
		if errors.Is(err, ErrNotFound) {
			// The imageRef names a file the image does not hold.
			return nil, 0, "", model.MarkInput(err)
		}
		return nil, 0, "", err
	}
	return fe.data, fe.mode, pinned, nil
}

// start returns the deadline of all reads, set by the first (zero
// without a timeout).
func (r *Reader) start() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deadline.IsZero() && r.timeout > 0 {
		r.deadline = time.Now().Add(r.timeout)
	}
	return r.deadline
}

// explain names the time bound when it is what stopped err.
func (r *Reader) explain(ctx context.Context, err error) error {
	// The image's own context (resolution, blob reads) may reach the
	// deadline before this call's does: look at the clock, not ctx alone.
	deadline := r.start()
	if !deadline.IsZero() && !time.Now().Before(deadline) && (ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)) {
		return fmt.Errorf("%w: reading imageRef content took longer than the bound of %s: %w", ErrRefused, r.timeout, err)
	}
	return err
}

// cleanPath turns "/bin/x" or "bin/x" into the tar form "bin/x".
func cleanPath(p string) (string, error) {
	if p == "" || strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("invalid path in image %q", p)
	}
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	if c == "" {
		return "", fmt.Errorf("invalid path in image %q: names the root", p)
	}
	return c, nil
}

func entryName(n string) string {
	n = strings.TrimPrefix(n, "./")
	return strings.TrimPrefix(path.Clean("/"+n), "/")
}

// ancestors returns the directories above p and p itself, from the top:
// "a/b/c" → ["a", "a/b", "a/b/c"].
func ancestors(p string) []string {
	var out []string
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return append(out, p)
}

func regular(typ byte) bool {
	return typ == tar.TypeReg || typ == tar.TypeRegA || typ == tar.TypeGNUSparse //nolint:staticcheck // TypeRegA is found in old images
}

func kind(typ byte) string {
	switch {
	case regular(typ):
		return "regular file"
	case typ == tar.TypeDir:
		return "directory"
	case typ == tar.TypeSymlink:
		return "symbolic link"
	case typ == tar.TypeLink:
		return "hard link"
	}
	return fmt.Sprintf("special file (tar type %q)", typ)
}

// find returns the file want as a runtime unpacking img would leave it.
// Layers are read from the top down; each is read to its end (the last
// entry for a path wins), and the first layer that decides want ends the
// search.
func (r *Reader) find(ctx context.Context, img v1.Image, want string) ([]byte, uint32, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, 0, err
	}
	anc := ancestors(want)
	for i := len(layers) - 1; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		st, err := r.scan(ctx, layers[i], anc)
		if err != nil {
			return nil, 0, fmt.Errorf("layer %d: %w", i, err)
		}
		data, mode, done, err := r.decide(ctx, layers[i], i, anc, st)
		st.close()
		if done || err != nil {
			return data, mode, err
		}
	}
	return nil, 0, ErrNotFound
}

// entry is the last tar entry of one layer for a path of interest.
type entry struct {
	typ      byte
	size     int64
	mode     uint32
	linkname string
	ordinal  int
	sparse   bool
	refused  error // why its content was not kept (size, budget)
}

// layerState is what one layer says about want and its parents.
type layerState struct {
	last     map[string]*entry // by path, for the paths of interest
	whiteout map[string]bool   // ".wh.NAME" for a path of interest
	opaque   map[string]bool   // ".wh..wh..opq" in a parent ("" = root)
	content  *os.File          // the content of last[want] when regular
}

func (s *layerState) close() {
	if s.content != nil {
		s.content.Close()
	}
}

// decide applies one layer's state: the file, or that it is hidden, or
// (done false) that lower layers decide.
func (r *Reader) decide(ctx context.Context, l v1.Layer, i int, anc []string, st *layerState) ([]byte, uint32, bool, error) {
	want := anc[len(anc)-1]
	for _, a := range anc[:len(anc)-1] {
		e := st.last[a]
		if e == nil || e.typ == tar.TypeDir {
			continue
		}
		if e.typ == tar.TypeSymlink {
			return nil, 0, true, fmt.Errorf("its parent %s is a symbolic link to %q in layer %d, which hides lower layers' content below it; name the target path instead", a, e.linkname, i)
		}
		return nil, 0, true, fmt.Errorf("%w (layer %d replaces its parent %s by a %s)", ErrNotFound, i, a, kind(e.typ))
	}
	if e := st.last[want]; e != nil {
		switch {
		case regular(e.typ):
			if e.sparse {
				return nil, 0, true, fmt.Errorf("%w: %s is a sparse tar entry of %d bytes in layer %d; sparse files are not read", ErrRefused, want, e.size, i)
			}
			if e.refused != nil {
				return nil, 0, true, e.refused
			}
			data, err := r.keep(st.content, e.size, want)
			return data, e.mode, true, err
		case e.typ == tar.TypeLink:
			data, mode, err := r.hardLink(ctx, l, want, e)
			return data, mode, true, err
		case e.typ == tar.TypeSymlink:
			return nil, 0, true, fmt.Errorf("%s is a symbolic link to %q; name the target file instead", want, e.linkname)
		case e.typ == tar.TypeDir:
			return nil, 0, true, fmt.Errorf("%s is a directory", want)
		default:
			return nil, 0, true, fmt.Errorf("%s is not a regular file (tar type %q)", want, e.typ)
		}
	}
	if st.opaque[""] {
		return nil, 0, true, fmt.Errorf("%w (removed by a whiteout in layer %d)", ErrNotFound, i)
	}
	for _, a := range anc {
		if st.whiteout[a] || (a != want && st.opaque[a]) {
			return nil, 0, true, fmt.Errorf("%w (removed by a whiteout in layer %d)", ErrNotFound, i)
		}
	}
	return nil, 0, false, nil
}

// scan reads layer l to its end and records the last entry of every path
// in anc, the whiteouts that concern them, and the content of the last
// regular entry for the file (anc's last element).
func (r *Reader) scan(ctx context.Context, l v1.Layer, anc []string) (_ *layerState, err error) {
	sc := &layerScan{r: r, anc: anc, want: anc[len(anc)-1], interest: make(map[string]int, len(anc)),
		st: &layerState{last: map[string]*entry{}, whiteout: map[string]bool{}, opaque: map[string]bool{}}}
	for i, a := range anc {
		sc.interest[a] = i
	}
	st := sc.st
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	rc, err := r.open(ctx, l)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	sc.tr = tar.NewReader(rc)
	for n := 0; ; n++ {
		h, err := sc.tr.Next()
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			return nil, err
		}
		if err := sc.entry(h, n); err != nil {
			return nil, err
		}
	}
}

// layerScan is the state of one scan: the paths of interest (the file,
// anc's last element, and its ancestors, by depth) and what the layer
// says of them so far.
type layerScan struct {
	r        *Reader
	anc      []string
	want     string
	interest map[string]int
	st       *layerState
	tr       *tar.Reader
}

// entry records the n-th entry of the layer, h, when it concerns a path
// of interest.
func (sc *layerScan) entry(h *tar.Header, n int) error {
	name := entryName(h.Name)
	if sc.whiteout(name) {
		return nil
	}
	depth, ok := sc.interest[name]
	if !ok {
		return nil
	}
	// A runtime cannot create an entry below a parent this layer made a
	// file or a link.
	for _, a := range sc.anc[:depth] {
		if e := sc.st.last[a]; e != nil && e.typ != tar.TypeDir {
			return fmt.Errorf("%s follows %s, a %s, in the same layer; a runtime cannot unpack this layer", name, a, kind(e.typ))
		}
	}
	e := &entry{typ: h.Typeflag, size: h.Size, mode: uint32(h.Mode) & 0o7777, linkname: h.Linkname, ordinal: n, sparse: isSparse(h)}
	if e.typ != tar.TypeDir {
		sc.replaceTree(depth)
	}
	sc.st.last[name] = e
	if name == sc.want && regular(e.typ) && !e.sparse {
		return sc.keepContent(e, h.Size)
	}
	return nil
}

// whiteout records name when it is a whiteout (or an opaque marker) of a
// path of interest, and reports whether it is one at all.
func (sc *layerScan) whiteout(name string) bool {
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	if !strings.HasPrefix(base, ".wh.") {
		return false
	}
	if base == ".wh..wh..opq" {
		if _, ok := sc.interest[dir]; ok || dir == "" {
			sc.st.opaque[dir] = true
		}
	} else if t := path.Join(dir, strings.TrimPrefix(base, ".wh.")); t != "" {
		if _, ok := sc.interest[t]; ok {
			sc.st.whiteout[t] = true
		}
	}
	return true
}

// replaceTree forgets what lies below depth: a non-directory there
// replaces the whole tree below it.
func (sc *layerScan) replaceTree(depth int) {
	for _, d := range sc.anc[depth+1:] {
		delete(sc.st.last, d)
	}
	if depth < len(sc.anc)-1 && sc.st.content != nil {
		sc.st.content.Close()
		sc.st.content = nil
	}
}

// keepContent keeps the content of the file's regular entry e of size
// bytes (the last one wins) unless the bounds refuse it.
func (sc *layerScan) keepContent(e *entry, size int64) error {
	st := sc.st
	if st.content != nil {
		st.content.Close()
		st.content = nil
	}
	if e.refused = sc.r.fits(sc.want, size); e.refused != nil {
		return nil
	}
	var err error
	st.content, err = sc.r.stream(sc.tr, size)
	return err
}

// isSparse reports a GNU sparse entry (old GNU format or PAX GNU.sparse.*):
// its holes read as zeros, so a few bytes in the layer can claim gigabytes.
func isSparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// fits checks a file of size bytes against the per-file limit and what is
// left of the budget.
func (r *Reader) fits(want string, size int64) error {
	if size > r.max {
		return fmt.Errorf("%w: %s is %d bytes, over the limit of %d bytes", ErrRefused, want, size, r.max)
	}
	r.mu.Lock()
	used := r.used
	r.mu.Unlock()
	if used+size > r.budget {
		return fmt.Errorf("%w: %s is %d bytes, over what is left (%d of %d bytes) of the budget for imageRef content", ErrRefused, want, size, r.budget-used, r.budget)
	}
	return nil
}

// stream copies size bytes of tr into a new unlinked temporary file.
func (r *Reader) stream(tr io.Reader, size int64) (*os.File, error) {
	f, err := os.CreateTemp(r.tmpDir, "oslayer-imageref-*")
	if err != nil {
		return nil, err
	}
	// Unlinked at once: nothing is left behind, even by a killed run.
	_ = os.Remove(f.Name())
	n, err := io.Copy(f, io.LimitReader(tr, size))
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// keep charges size bytes to the budget and maps f's content.
func (r *Reader) keep(f *os.File, size int64, want string) ([]byte, error) {
	if f == nil {
		return nil, fmt.Errorf("%s: content was not kept", want)
	}
	r.mu.Lock()
	if r.used+size > r.budget {
		left := r.budget - r.used
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: %s is %d bytes, over what is left (%d of %d bytes) of the budget for imageRef content", ErrRefused, want, size, left, r.budget)
	}
	r.used += size
	r.mu.Unlock()
	if size == 0 {
		return []byte{}, nil
	}
	// A private mapping: the pages come from the (unlinked) file and can
	// be dropped under memory pressure; a write would only copy a page.
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", want, err)
	}
	r.mu.Lock()
	r.maps = append(r.maps, data)
	r.mu.Unlock()
	return data, nil
}

// hardLink resolves want, a hard link (entry e) in layer l, to the last
// regular entry for its target before it in the same layer.
func (r *Reader) hardLink(ctx context.Context, l v1.Layer, want string, e *entry) ([]byte, uint32, error) {
	target := entryName(e.linkname)
	rc, err := r.open(ctx, l)
	if err != nil {
		return nil, 0, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var (
		found *entry
		f     *os.File
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for n := 0; n < e.ordinal; n++ {
		h, err := tr.Next()
		if err != nil {
			return nil, 0, err
		}
		if entryName(h.Name) != target {
			continue
		}
		if f != nil {
			f.Close()
			f = nil
		}
		found = &entry{typ: h.Typeflag, size: h.Size, mode: uint32(h.Mode) & 0o7777, sparse: isSparse(h)}
		if regular(h.Typeflag) && !found.sparse {
			if found.refused = r.fits(target, h.Size); found.refused == nil {
				if f, err = r.stream(tr, h.Size); err != nil {
					return nil, 0, err
				}
			}
		}
	}
	switch {
	case found == nil:
		return nil, 0, fmt.Errorf("%s is a hard link to %s, which is not in the layer before it", want, target)
	case !regular(found.typ):
		return nil, 0, fmt.Errorf("%s is a hard link to %s, a %s", want, target, kind(found.typ))
	case found.sparse:
		return nil, 0, fmt.Errorf("%w: %s is a hard link to %s, a sparse tar entry; sparse files are not read", ErrRefused, want, target)
	case found.refused != nil:
		return nil, 0, found.refused
	}
	data, err := r.keep(f, found.size, want)
	return data, found.mode, err
}

// open returns the uncompressed tar stream of l (gzip, zstd or plain),
// which fails once ctx is done or once the layer expands more than
// MaxExpansion times its compressed size.
func (r *Reader) open(ctx context.Context, l v1.Layer) (io.ReadCloser, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	in := &counter{r: rc}
	br := bufio.NewReader(in)
	magic, _ := br.Peek(4)
	var (
		out   io.Reader = br
		close           = func() {}
	)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			rc.Close()
			return nil, err
		}
		out = zr
	case len(magic) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd:
		// A hostile frame cannot claim a window beyond what real layers use.
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(128<<20))
		if err != nil {
			rc.Close()
			return nil, err
		}
		out, close = zr, zr.Close
	}
	return &bounded{ctx: ctx, r: out, in: in, closer: func() error { close(); return rc.Close() }}, nil
}

type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// bounded is an uncompressed layer stream that stops on ctx and on a
// decompression bomb.
type bounded struct {
	ctx    context.Context
	r      io.Reader
	in     *counter
	out    int64
	closer func() error
}

func (b *bounded) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := b.r.Read(p)
	b.out += int64(n)
	if b.out > bombFloor && b.out > MaxExpansion*b.in.n {
		return n, fmt.Errorf("%w: the layer expands more than %d times (%d compressed bytes to over %d bytes): a decompression bomb", ErrRefused, MaxExpansion, b.in.n, b.out)
	}
	return n, err
}

func (b *bounded) Close() error { return b.closer() }
