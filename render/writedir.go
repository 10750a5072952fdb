package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/oslayer/oslayer/render/tarball"
	"github.com/oslayer/oslayer/render/tree"
)

// OutputMarker is the file WriteDir puts in every directory it writes. Only
// a directory holding it, with the content WriteDir writes, is ever
// replaced by a later WriteDir.
const OutputMarker = ".oslayer-render"

const markerContent = "This directory was written by oslayer render; the next render into it replaces it.\n"

// tmpInfix names the temporary directories WriteDir makes beside an output
// ("." + base + tmpInfix + random); sweepTemps removes those of runs that
// were killed.
const tmpInfix = ".oslayer-tmp-"

// legacyTmpInfix named the temporary directories of versions before the
// lock; sweepTemps removes those older than legacyAge.
const (
	legacyTmpInfix = ".tmp-"
	legacyAge      = time.Hour
)

// WriteDir writes the result to dir:
//
//	dir/rootfs/              exactly what the layers add, unpacked (modes,
//	                         owners when running as root, symlinks, hard links)
//	dir/layers/NN-NAME.tar.gz the layers, bottom first
//	dir/report.json          the Result (layers, report, inputs) as JSON
//	dir/.oslayer-render      the marker (OutputMarker)
//
// Everything is written into a temporary directory next to dir and swapped
// into place at the end (atomically, where the file system can exchange two
// names), so a failure or a cancelled ctx leaves no partial output. An
// existing dir is replaced only if it holds the marker of a previous render,
// or is empty; anything else is an error naming it.
//
// The temporary directory is locked while it is written; temporary
// directories beside dir that no running process holds (left by a killed
// run) are removed first.
func (r *Result) WriteDir(ctx context.Context, dir string) (err error) {
	if r.tree == nil {
		return errors.New("write: result has no tree (not produced by Render)")
	}
	dir = filepath.Clean(dir)
	if err := replaceable(dir); err != nil {
		return err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	sweepTemps(parent, filepath.Base(dir))
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+tmpInfix)
	if err != nil {
		return err
	}
	lock, err := lockDir(tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return err
	}
	defer lock.Close()
	defer func() {
		if err != nil {
			removeAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := writeTree(ctx, filepath.Join(tmp, "rootfs"), r.tree); err != nil {
		return err
	}
	ld := filepath.Join(tmp, "layers")
	if err := os.Mkdir(ld, 0o755); err != nil {
		return err
	}
	for i, l := range r.Layers {
		if err := ctx.Err(); err != nil {
			return err
		}
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
	if err := os.WriteFile(filepath.Join(tmp, OutputMarker), []byte(markerContent), 0o644); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Check again: dir may have been created since.
	if err := replaceable(dir); err != nil {
		return err
	}
	return swap(tmp, dir)
}

// replaceable returns nil when dir does not exist, is empty, or holds a
// previous render's marker, and an error naming dir otherwise.
func replaceable(dir string) error {
	fi, err := os.Lstat(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("output %s exists and is not a directory", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(ents) == 0 {
		return nil
	}
	m, err := os.Lstat(filepath.Join(dir, OutputMarker))
	if err == nil && m.Mode().IsRegular() && m.Size() == int64(len(markerContent)) {
		if b, err := os.ReadFile(filepath.Join(dir, OutputMarker)); err == nil && string(b) == markerContent {
			return nil
		}
	}
	return fmt.Errorf("output %s exists, is not empty and was not written by oslayer render (no %s marker); refusing to replace it: remove it or choose another directory", dir, OutputMarker)
}

// swap puts tmp in dir's place and removes what was there.
func swap(tmp, dir string) error {
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return os.Rename(tmp, dir)
	}
	// One atomic exchange of the two names: dir is never missing.
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dir, unix.RENAME_EXCHANGE); err == nil {
		// tmp now holds the previous render; a failure to remove it
		// leaves a temporary directory that the next run sweeps.
		_ = removeAll(tmp)
		return nil
	}
	// No exchange on this file system: move the old render aside (under
	// a temporary name, so a kill leaves only what sweepTemps removes).
	old := tmp + "-old"
	if err := os.Rename(dir, old); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.Rename(old, dir)
		return err
	}
	_ = removeAll(old)
	return nil
}

// lockDir holds an exclusive lock on directory p until the returned file is
// closed (or the process ends).
func lockDir(p string) (*os.File, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	return f, nil
}

// sweepTemps removes the temporary directories of earlier writes to
// parent/base that no live process holds locked: those of killed runs.
func sweepTemps(parent, base string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	prefix := "." + base + tmpInfix
	legacy := "." + base + legacyTmpInfix
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(parent, e.Name())
		if strings.HasPrefix(e.Name(), legacy) {
			// Written by an earlier version, which took no lock: only
			// what no run has touched for an hour.
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > legacyAge {
				_ = removeAll(p)
			}
			continue
		}
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		l, err := lockDir(p)
		if err != nil {
			continue // a running write, or gone already
		}
		_ = removeAll(p)
		l.Close()
	}
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
func writeTree(ctx context.Context, root string, t *tree.Tree) error {
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	w := treeWriter{root: root, chown: os.Geteuid() == 0}
	entries := t.Entries()
	for i, e := range entries {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := w.write(e); err != nil {
			return err
		}
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if e := entries[i]; e.Kind == tree.Dir {
			if err := w.finishDir(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// treeWriter unpacks entries under root, with their owners when chown.
type treeWriter struct {
	root  string
	chown bool
}

// native is the path of p under root.
func (w treeWriter) native(p string) string {
	return filepath.Join(w.root, filepath.FromSlash(strings.TrimPrefix(p, "/")))
}

// lchown sets p's owner when the writer may.
func (w treeWriter) lchown(p string, uid, gid int) error {
	if !w.chown {
		return nil
	}
	return os.Lchown(p, uid, gid)
}

// write creates entry e (a directory with a default mode: finishDir sets
// its owner and mode).
func (w treeWriter) write(e *tree.Entry) error {
	p := w.native(e.Path)
	switch e.Kind {
	case tree.Dir:
		return os.Mkdir(p, 0o755)
	case tree.File:
		if err := os.WriteFile(p, e.Data, 0o600); err != nil {
			return err
		}
		if err := w.lchown(p, e.UID, e.GID); err != nil {
			return err
		}
		// After chown: chown clears setuid/setgid bits.
		return os.Chmod(p, fileMode(e.Mode))
	case tree.Symlink:
		if err := os.Symlink(e.Target, p); err != nil {
			return err
		}
		return w.lchown(p, e.UID, e.GID)
	case tree.Hardlink:
		return os.Link(w.native(e.Target), p)
	case tree.Whiteout:
		// As in the layer: an empty file DIR/.wh.NAME.
		dir, base := filepath.Split(p)
		return os.WriteFile(filepath.Join(dir, tarball.WhiteoutPrefix+base), nil, 0)
	default:
		return fmt.Errorf("%s: unsupported entry type %v", e.Path, e.Kind)
	}
}

// finishDir sets directory e's owner and mode.
func (w treeWriter) finishDir(e *tree.Entry) error {
	p := w.native(e.Path)
	if err := w.lchown(p, e.UID, e.GID); err != nil {
		return err
	}
	return os.Chmod(p, fileMode(e.Mode))
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
