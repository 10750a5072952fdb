package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ErrDigestMismatch is the error of a blob whose content does not hash to
// the digest it was read under.
var ErrDigestMismatch = errors.New("content does not match its digest")

// ReadLayer returns the uncompressed content of layer once its whole
// compressed blob (at most max bytes) has been read and found to hash to
// the layer's digest. go-containerregistry checks a registry blob only
// when it is read to its end and an OCI layout blob never; a reader that
// stops early (a tar entry found, a gzip stream that ends before
// trailing bytes) would use content nobody checked. The blob is spooled
// to a temporary file, removed on Close.
func ReadLayer(layer v1.Layer, max int64) (io.ReadCloser, error) {
	want, err := layer.Digest()
	if err != nil {
		return nil, err
	}
	f, err := spoolVerified(layer, want, max)
	if err != nil {
		return nil, err
	}
	cleanup := func() { f.Close(); os.Remove(f.Name()) }
	verified, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(io.NewSectionReader(f, 0, 1<<62)), nil
	})
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("blob %s: %w", want, err)
	}
	rc, err := verified.Uncompressed()
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("blob %s: %w", want, err)
	}
	return &spooled{ReadCloser: rc, cleanup: cleanup}, nil
}

// spoolVerified copies the compressed blob into a temporary file while
// hashing it, and keeps the file only when the digest matches.
func spoolVerified(layer v1.Layer, want v1.Hash, max int64) (*os.File, error) {
	if want.Algorithm != "sha256" {
		return nil, fmt.Errorf("blob %s: unsupported digest algorithm", want)
	}
	rc, err := layer.Compressed()
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", want, err)
	}
	defer rc.Close()
	f, err := os.CreateTemp("", "oslayer-blob-*")
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(rc, max+1))
	switch {
	case err != nil && strings.Contains(err.Error(), "error verifying"):
		// go-containerregistry's own check at the end of a registry blob
		// (its error type is internal).
		err = fmt.Errorf("blob %s: %w (%v): the registry serves other content under this digest", want, ErrDigestMismatch, err)
	case err != nil:
		err = fmt.Errorf("blob %s: %w", want, err)
	case n > max:
		err = fmt.Errorf("blob %s: more than %d bytes", want, max)
	case hex.EncodeToString(h.Sum(nil)) != want.Hex:
		err = fmt.Errorf("blob %s: %w (it hashes to sha256:%s): the registry or layout serves other content under this digest", want, ErrDigestMismatch, hex.EncodeToString(h.Sum(nil)))
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// spooled removes the spooled blob when the reader is closed.
type spooled struct {
	io.ReadCloser
	cleanup func()
}

func (s *spooled) Close() error {
	err := s.ReadCloser.Close()
	s.cleanup()
	return err
}

// checkManifest verifies that raw hashes to want (a manifest or index
// read from an OCI layout, which go-containerregistry does not check).
func checkManifest(raw []byte, want v1.Hash) error {
	got := sha256.Sum256(raw)
	if want.Algorithm == "sha256" && hex.EncodeToString(got[:]) != want.Hex {
		return fmt.Errorf("manifest %s: %w (it hashes to sha256:%x)", want, ErrDigestMismatch, got)
	}
	return nil
}

// checkImage verifies an image's manifest against want (the digest it was
// selected by) and its config blob against the manifest's config digest.
func checkImage(img v1.Image, want v1.Hash) error {
	raw, err := img.RawManifest()
	if err != nil {
		return err
	}
	if err := checkManifest(raw, want); err != nil {
		return err
	}
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	if err := checkManifest(cfg, m.Config.Digest); err != nil {
		return fmt.Errorf("config blob of %s: %w", want, errors.Unwrap(err))
	}
	return nil
}
