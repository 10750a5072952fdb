package ignition

import (
	"io/fs"
	"syscall"
)

// owner returns the numeric owner of fi.
func owner(fi fs.FileInfo) (int, int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}
