// Package inputfile reads the files a user names as inputs (documents,
// directories of them, keys, credentials) so that nothing but regular files
// and directories is ever opened for reading: a named pipe, a device or a
// socket given as an input would block or stream without end, so it is an
// error that names the path.
//
// Every path is checked with lstat first. A symbolic link is followed (the
// files of a mounted Kubernetes Secret or ConfigMap are links) and its
// target must be a regular file. The file is then opened without blocking
// and checked again on the open descriptor, so a path swapped for a pipe
// between the check and the open cannot block the reader either.
package inputfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// MaxSize bounds one input file read with Read.
const MaxSize = 256 << 20 // 256 MiB

// ErrNotRegular is returned (wrapped, with the path and its kind) for an
// input that is neither a regular file nor a directory.
var ErrNotRegular = errors.New("not a regular file")

// Kind names the type of a file mode for messages: "a named pipe (FIFO)",
// "a device", "a socket", ...
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file (mode " + m.String() + ")"
}

// Stat returns the file info of path, following a symbolic link, and fails
// with ErrNotRegular unless it is a regular file or a directory.
func Stat(path string) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if fi, err = os.Stat(path); err != nil {
			return nil, err
		}
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		return nil, notRegular(path, fi.Mode())
	}
	return fi, nil
}

func notRegular(path string, m fs.FileMode) error {
	return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: it is %s", ErrNotRegular, Kind(m))}
}

// Read returns the content of the regular file at path (a symbolic link to
// one is followed). Anything else, or a file over MaxSize, is an error
// naming the path.
func Read(path string) ([]byte, error) {
	fi, err := Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: errors.New("is a directory")}
	}
	// O_NONBLOCK: opening a FIFO that replaced the file since the check
	// returns at once instead of waiting for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !ofi.Mode().IsRegular() {
		return nil, notRegular(path, ofi.Mode())
	}
	if ofi.Size() > MaxSize {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%d bytes exceed the limit of %d bytes for an input file", ofi.Size(), MaxSize)}
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSize {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("more than %d bytes, the limit for an input file", MaxSize)}
	}
	return b, nil
}

// CheckTree fails with ErrNotRegular, naming the first offender, when the
// directory tree at dir holds anything but directories, regular files and
// symbolic links to regular files. It reads no file, only names and types.
func CheckTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Type().IsRegular() {
			return nil
		}
		_, err = Stat(p)
		return err
	})
}
