package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
)

// RefNameAnnotation tags a manifest in an OCI layout's index.json.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// The "kind" annotations of a layout `cosign save` writes: the image, its
// signatures image and its attestations image, one each; `cosign verify
// --local-image` reads them. A layout holds the signatures of one image
// (the one whose entry has KindImage).
const (
	KindAnnotation   = "kind"
	KindImage        = "dev.cosignproject.cosign/image"
	KindSignatures   = "dev.cosignproject.cosign/sigs"
	KindAttestations = "dev.cosignproject.cosign/atts"
)

type layoutPublisher struct{ p *Publisher }

type blobSource struct {
	digest v1.Hash
	size   int64
	open   func() (io.ReadCloser, error)
	what   string
}

// layoutImage is what a layout write reads of the image: its digest,
// manifest, config and layers.
type layoutImage struct {
	d           v1.Hash
	m           *v1.Manifest
	rawManifest []byte
	rawConfig   []byte
	layers      []v1.Layer
}

// Write writes b's blobs into the layout (those it has are checked and
// kept), the config and the manifest last; Commit moves the tag.
func (l *layoutPublisher) Write(ctx context.Context, b *assemble.Built) (*assemble.Published, error) {
	p := l.p
	pub, err := l.write(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("write OCI layout %s: %w", p.dir, err)
	}
	return pub, nil
}

// write reads the image, prepares the layout and its temp dir, and
// writes the blobs.
func (l *layoutPublisher) write(ctx context.Context, b *assemble.Built) (*assemble.Published, error) {
	p := l.p
	img, err := readLayoutImage(b)
	if err != nil {
		return nil, err
	}
	if err := ensureDir(p.dir); err != nil {
		return nil, failed("create layout", err)
	}
	rt, err := newRunTemp(p.dir, p.o.log)
	if err != nil {
		return nil, failed("create temp dir", err)
	}
	defer rt.close()
	if err := ensureLayout(p.dir, rt.dir); err != nil {
		return nil, failed("create layout", err)
	}
	srcs, total := img.layerSources()
	prog := newProgress(p.o, "write oci:"+p.dir, total+int64(len(img.rawConfig)+len(img.rawManifest)))
	if prog != nil {
		close(prog.updates)
		<-prog.done
	}
	log := p.o.log.With("layout", p.dir, "digest", img.d.String())
	log.Info("writing image to OCI layout", "blobs", len(srcs)+2, "bytes", total)
	w := &layoutWriter{dir: p.dir, tmp: rt.dir, log: log, prog: prog}
	prog.setMoved("written", "already there", w.counts)
	err = w.writeImage(ctx, srcs, img, p.reg.Jobs)
	if prog != nil {
		prog.finish(err)
	}
	if err != nil {
		return nil, failed("write blobs", err)
	}
	log.Info("image written to OCI layout", "written", w.written, "skipped", w.skipped)
	return &assemble.Published{Ref: registry.LayoutPrefix + p.dir + "@" + img.d.String(), Uploaded: w.written, Skipped: w.skipped}, nil
}

// readLayoutImage reads what a layout write needs of b's image.
func readLayoutImage(b *assemble.Built) (*layoutImage, error) {
	d, err := checkDigest(b)
	if err != nil {
		return nil, failed("image", err)
	}
	img := &layoutImage{d: d}
	if img.m, err = b.Image.Manifest(); err != nil {
		return nil, failed("read manifest", err)
	}
	if img.rawManifest, err = b.Image.RawManifest(); err != nil {
		return nil, failed("read manifest", err)
	}
	if img.rawConfig, err = b.Image.RawConfigFile(); err != nil {
		return nil, failed("read config", err)
	}
	if img.layers, err = b.Image.Layers(); err != nil {
		return nil, failed("read layers", err)
	}
	if len(img.layers) != len(img.m.Layers) {
		return nil, failed("read layers", fmt.Errorf("manifest lists %d layers, image has %d", len(img.m.Layers), len(img.layers)))
	}
	return img, nil
}

// layerSources are the image's distinct layer blobs and their total size.
func (img *layoutImage) layerSources() ([]blobSource, int64) {
	var srcs []blobSource
	seen := map[v1.Hash]bool{}
	var total int64
	for i, desc := range img.m.Layers {
		if seen[desc.Digest] {
			continue
		}
		seen[desc.Digest] = true
		srcs = append(srcs, blobSource{digest: desc.Digest, size: desc.Size, open: img.layers[i].Compressed, what: fmt.Sprintf("layer %d (%s)", i+1, desc.Digest)})
		total += desc.Size
	}
	return srcs, total
}

// writeImage writes the layer blobs, jobs at a time (0: 4), then the
// config, then the manifest last: a manifest blob in the layout means
// every blob it names is there.
func (w *layoutWriter) writeImage(ctx context.Context, srcs []blobSource, img *layoutImage, jobs int) error {
	if err := w.writeAll(ctx, srcs, jobs); err != nil {
		return err
	}
	for _, s := range []blobSource{
		{digest: img.m.Config.Digest, size: int64(len(img.rawConfig)), open: bytesOpener(img.rawConfig), what: "config " + img.m.Config.Digest.String()},
		{digest: img.d, size: int64(len(img.rawManifest)), open: bytesOpener(img.rawManifest), what: "manifest " + img.d.String()},
	} {
		if err := w.write(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// writeAll writes srcs, jobs at a time (0: 4).
func (w *layoutWriter) writeAll(ctx context.Context, srcs []blobSource, jobs int) error {
	if jobs <= 0 {
		jobs = 4
	}
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, jobs)
		errs = make([]error, len(srcs))
	)
	for i, s := range srcs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = w.write(ctx, s)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// counts are the bytes written and found already there so far.
func (w *layoutWriter) counts() (int64, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written, w.skipped
}

// layoutWriter writes blobs into a layout and counts them.
type layoutWriter struct {
	dir  string
	tmp  string // this run's temp dir (runTemp)
	log  *slog.Logger
	prog *progress

	mu               sync.Mutex
	written, skipped int64
}

func (w *layoutWriter) write(ctx context.Context, s blobSource) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	open := s.open
	s.open = func() (io.ReadCloser, error) {
		rc, err := open()
		if err != nil {
			return nil, err
		}
		return &ctxReader{ctx: ctx, rc: rc}, nil
	}
	n, err := writeBlob(w.dir, w.tmp, s, w.log)
	if err != nil {
		return fmt.Errorf("%s: %w", s.what, err)
	}
	w.mu.Lock()
	if n < 0 {
		w.skipped += s.size
		w.log.Debug("blob present", "digest", s.digest.String())
	} else {
		w.written += n
		w.log.Debug("blob written", "digest", s.digest.String(), "bytes", n)
	}
	w.mu.Unlock()
	w.prog.add(s.size)
	return nil
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	rc  io.ReadCloser
}

func (r *ctxReader) Read(b []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.rc.Read(b)
}

func (r *ctxReader) Close() error { return r.rc.Close() }

func bytesOpener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

func blobPath(dir string, h v1.Hash) string {
	return filepath.Join(dir, "blobs", h.Algorithm, h.Hex)
}

// writeBlob writes s into the layout unless a blob of that digest is there
// (then it returns -1). A blob already there is reused only after its
// content is read and found to have the digest and size: a corrupt one is
// replaced (and logged). The blob is written to a temp file in tmp, its
// digest and size checked, then renamed into place.
func writeBlob(dir, tmpDir string, s blobSource, log *slog.Logger) (int64, error) {
	if s.digest.Algorithm != "sha256" {
		return 0, fmt.Errorf("unsupported digest algorithm %q", s.digest.Algorithm)
	}
	path := blobPath(dir, s.digest)
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		got, n, err := fileDigest(path)
		switch {
		case err != nil:
			log.Warn(fmt.Sprintf("blob %s in the OCI layout (%s) is unreadable, writing it again: %v", s.digest, path, err),
				"digest", s.digest.String(), "path", path, "error", err)
		case got == s.digest.Hex && n == s.size:
			return -1, nil
		default:
			log.Warn(fmt.Sprintf("blob %s in the OCI layout (%s) is corrupt (its content is sha256:%s, %d bytes; want %d), writing it again", s.digest, path, got, n, s.size),
				"digest", s.digest.String(), "path", path, "found", "sha256:"+got, "size", n)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, err
	}
	rc, err := s.open()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(tmpDir, "blob-"+s.digest.Hex[:12]+"-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), rc)
	if err != nil {
		tmp.Close()
		return 0, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != s.digest.Hex || n != s.size {
		tmp.Close()
		return 0, fmt.Errorf("content is sha256:%s (%d bytes), want %s (%d bytes)", got, n, s.digest, s.size)
	}
	if err := install(tmp, path); err != nil {
		return 0, err
	}
	return n, nil
}

// install makes the written temp file tmp readable by all, syncs it,
// closes it and renames it to path.
func install(tmp *os.File, path string) error {
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// fileDigest returns the sha256 (hex) and size of the file at path.
func fileDigest(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// TempDirName is the directory inside an OCI layout where oslayer keeps
// the temp files of a write: one subdirectory per run, locked (flock) by
// the process writing. A run killed before it could clean up leaves its
// subdirectory unlocked; the next write or commit to the layout removes it.
const TempDirName = ".oslayer-tmp"

// runTemp is one run's temp directory in a layout.
type runTemp struct {
	dir  string
	lock *os.File
}

// newRunTemp sweeps the temp directories of killed runs from layout and
// creates and locks this run's.
func newRunTemp(layout string, log *slog.Logger) (*runTemp, error) {
	base := filepath.Join(layout, TempDirName)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, err
	}
	sweepTemp(base, log)
	sweepLegacyTemp(filepath.Join(layout, "blobs", "sha256"), log)
	for range 5 {
		d, err := os.MkdirTemp(base, "run-")
		if err != nil {
			return nil, err
		}
		f, err := os.Open(d)
		if err != nil {
			continue // swept by another run before we locked it
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		// Another run's sweep may have removed it between MkdirTemp and
		// the lock: then it is gone, and we make another.
		if st, err := os.Stat(d); err == nil {
			if fst, err := f.Stat(); err == nil && os.SameFile(st, fst) {
				return &runTemp{dir: d, lock: f}, nil
			}
		}
		f.Close()
	}
	return nil, fmt.Errorf("could not create a temp directory in %s", base)
}

// close removes the run's temp directory and releases it.
func (r *runTemp) close() {
	_ = os.RemoveAll(r.dir)
	_ = syscall.Flock(int(r.lock.Fd()), syscall.LOCK_UN)
	r.lock.Close()
}

// legacyTempAge is how long a temp file of an older oslayer (written next
// to the blobs, blobs/sha256/.tmp-*) must have been left untouched before
// a write removes it: a run still writing it touches it all the time.
const legacyTempAge = 10 * time.Minute

// sweepLegacyTemp removes the temp files older oslayer versions wrote
// among the blobs and left behind when killed.
func sweepLegacyTemp(blobs string, log *slog.Logger) {
	ents, err := os.ReadDir(blobs)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".tmp-") || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < legacyTempAge {
			continue
		}
		p := filepath.Join(blobs, e.Name())
		if err := os.Remove(p); err == nil {
			log.Info("removed the temp file of a killed run", "file", p, "bytes", info.Size())
		}
	}
}

// sweepTemp removes every run directory in base that no live process
// holds locked: what killed runs left behind.
func sweepTemp(base string, log *slog.Logger) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		p := filepath.Join(base, e.Name())
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			var n int64
			_ = filepath.WalkDir(p, func(_ string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					if info, err := d.Info(); err == nil {
						n += info.Size()
					}
				}
				return nil
			})
			if err := os.RemoveAll(p); err == nil {
				log.Info("removed the temp files of a killed run", "dir", p, "bytes", n)
			}
		}
		f.Close()
	}
}

const ociLayoutFile = `{"imageLayoutVersion":"1.0.0"}`

// ensureDir creates dir if it is missing and refuses a directory that
// holds anything but an OCI layout.
func ensureDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); errors.Is(err, os.ErrNotExist) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if e.Name() != TempDirName {
				return fmt.Errorf("%s is not empty and not an OCI layout (no oci-layout file); refusing to write into it", dir)
			}
		}
	} else if err != nil {
		return err
	}
	return nil
}

// ensureLayout writes the oci-layout file and an empty index.json into
// dir (checked by ensureDir) when they are missing, through temp files in
// tmp.
func ensureLayout(dir, tmp string) error {
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); errors.Is(err, os.ErrNotExist) {
		if err := writeFileAtomic(dir, tmp, "oci-layout", []byte(ociLayoutFile)); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "index.json")); errors.Is(err, os.ErrNotExist) {
		empty, _ := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{}})
		if err := writeFileAtomic(dir, tmp, "index.json", empty); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	return nil
}

// writeFileAtomic writes dir/name through a temp file in tmp and a rename.
func writeFileAtomic(dir, tmpDir, name string, b []byte) error {
	tmp, err := os.CreateTemp(tmpDir, name+"-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	return install(tmp, filepath.Join(dir, name))
}

func (l *layoutPublisher) Commit(ctx context.Context, b *assemble.Built, pub *assemble.Published) error {
	p := l.p
	fail := func(step string, err error) error {
		return fmt.Errorf("commit OCI layout %s:%s: %s: %w", p.dir, p.layoutTag, step, err)
	}
	d, err := checkDigest(b)
	if err != nil {
		return fail("image", err)
	}
	mt, err := b.Image.MediaType()
	if err != nil {
		return fail("read manifest", err)
	}
	raw, err := b.Image.RawManifest()
	if err != nil {
		return fail("read manifest", err)
	}
	return l.commit(ctx, pub, d, mt, raw)
}
