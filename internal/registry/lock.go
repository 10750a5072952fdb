package registry

import (
	"os"
	"syscall"
)

// LockLayout takes the exclusive flock on an OCI layout directory that
// every writer of its index.json takes (publish moving a tag, prune
// deleting), so concurrent writers, in this or another process, do not
// lose each other's entries. It returns the unlock.
func LockLayout(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
