package baseindex

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// CacheEnv overrides the disk cache directory (DefaultCacheDir).
const CacheEnv = "OSLAYER_BASEINDEX_CACHE"

// DefaultCacheDir is $OSLAYER_BASEINDEX_CACHE, else
// $XDG_CACHE_HOME/oslayer/baseindex (os.UserCacheDir: ~/.cache/... on
// Linux).
func DefaultCacheDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("base index cache: %w (set %s)", err, CacheEnv)
	}
	return filepath.Join(d, "oslayer", "baseindex"), nil
}

// Cache is the on-disk cache of base indexes, one file per base manifest
// digest: DIR/sha256-<hex>.json.gz.
type Cache struct{ Dir string }

// File is the cache file of base.
func (c Cache) File(base v1.Hash) string {
	return filepath.Join(c.Dir, base.Algorithm+"-"+base.Hex+".json.gz")
}

// Load returns the cached index of base, or (nil, nil) when there is none.
// A file that fails Unmarshal's checks (another base, a digest that does
// not match its content, another format version) is an error; the caller
// rebuilds and Store replaces it.
func (c Cache) Load(base v1.Hash) (*Index, error) {
	data, err := os.ReadFile(c.File(base))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ix, err := Unmarshal(data, base)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.File(base), err)
	}
	return ix, nil
}

// Store writes ix atomically (a temporary file renamed into place), so
// concurrent builds on the same base never see half a file.
func (c Cache) Store(ix *Index) error {
	data, err := ix.Marshal()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("base index cache: %w", err)
	}
	tmp, err := os.CreateTemp(c.Dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("base index cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("base index cache: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("base index cache: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("base index cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), c.File(ix.Base)); err != nil {
		return fmt.Errorf("base index cache: %w", err)
	}
	return nil
}
