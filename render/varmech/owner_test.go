package varmech

import (
	"io/fs"
	"syscall"
)

// owner returns a file's uid and gid.
func owner(fi fs.FileInfo) (int, int) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, -1
	}
	return int(st.Uid), int(st.Gid)
}
