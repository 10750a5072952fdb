package layers

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/oslayer/oslayer/layers/tree"
)

// WriteDir writes the result to dir:
//
//	dir/rootfs/              exactly what the layers add, unpacked (modes,
//	                         owners when running as root, symlinks, hard links)
//	dir/layers/NN-NAME.tar.gz the layers, bottom first
//	dir/report.json          the Result (layers, report, inputs) as JSON
//
// Everything is written into a temporary directory next to dir and renamed
// into place at the end, so a failure leaves no partial output. An existing
// dir is replaced only if it is empty or holds a previous render (a
// report.json); anything else is an error.
func (r *Result) WriteDir(dir string) (err error) {
	if r.tree == nil {
		return errors.New("write: result has no tree (not produced by Render)")
	}
	dir = filepath.Clean(dir)
	if fi, err := os.Lstat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("output %s exists and is not a directory", dir)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		if len(ents) > 0 {
			if _, err := os.Stat(filepath.Join(dir, "report.json")); err != nil {
				return fmt.Errorf("output %s exists, is not empty and holds no previous render (report.json); refusing to replace it", dir)
			}
		}
	} else if !os.IsNotExist(err) {
		return err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := writeTree(filepath.Join(tmp, "rootfs"), r.tree); err != nil {
		return err
	}
	ld := filepath.Join(tmp, "layers")
	if err := os.Mkdir(ld, 0o755); err != nil {
		return err
	}
	for i, l := range r.Layers {
		name := fmt.Sprintf("%02d-%s.tar.gz", i+1, l.Name)
		if err := os.WriteFile(filepath.Join(ld, name), l.Gzip, 0o644); err != nil {
			return err
		}
	}
	rep, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "report.json"), append(rep, '\n'), 0o644); err != nil {
		return err
	}
	// Swap into place: move an old render aside, rename, remove the old one.
	var old string
	if _, err := os.Lstat(dir); err == nil {
		old = tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			_ = os.Rename(old, dir)
		}
		return err
	}
	if old != "" {
		return removeAll(old)
	}
	return nil
}

// removeAll removes a tree that may contain read-only directories.
func removeAll(p string) error {
	_ = filepath.WalkDir(p, func(q string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o755)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// writeTree unpacks t under root. Directory modes are applied last so that
// read-only directories can still be filled; owners are set only when the
// process may (running as root).
func writeTree(root string, t *tree.Tree) error {
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	chown := os.Geteuid() == 0
	entries := t.Entries()
	native := func(p string) string { return filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(p, "/"))) }
	for _, e := range entries {
		p := native(e.Path)
		switch e.Kind {
		case tree.Dir:
			if err := os.Mkdir(p, 0o755); err != nil {
				return err
			}
		case tree.File:
			if err := os.WriteFile(p, e.Data, 0o600); err != nil {
				return err
			}
			if chown {
				if err := os.Lchown(p, e.UID, e.GID); err != nil {
					return err
				}
			}
			// After chown: chown clears setuid/setgid bits.
			if err := os.Chmod(p, fileMode(e.Mode)); err != nil {
				return err
			}
		case tree.Symlink:
			if err := os.Symlink(e.Target, p); err != nil {
				return err
			}
			if chown {
				if err := os.Lchown(p, e.UID, e.GID); err != nil {
					return err
				}
			}
		case tree.Hardlink:
			if err := os.Link(native(e.Target), p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unsupported entry type %v", e.Path, e.Kind)
		}
	}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if e.Kind != tree.Dir {
			continue
		}
		p := native(e.Path)
		if chown {
			if err := os.Lchown(p, e.UID, e.GID); err != nil {
				return err
			}
		}
		if err := os.Chmod(p, fileMode(e.Mode)); err != nil {
			return err
		}
	}
	return nil
}

func fileMode(m uint32) os.FileMode {
	fm := os.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		fm |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		fm |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	return fm
}
