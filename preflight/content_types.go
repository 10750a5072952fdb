package preflight

import (
	"archive/tar"
	"fmt"
)

// typeRule refuses the entry types ostree cannot import: devices, FIFOs,
// sockets, and hard links to anything but an earlier entry of the layer.
func typeRule(r *ruleCollector, e *Entry) {
	switch e.Type {
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		kind := map[byte]string{tar.TypeChar: "character device", tar.TypeBlock: "block device", tar.TypeFifo: "FIFO"}[e.Type]
		r.add("special-files", Error, e.Path, fmt.Sprintf("%s entries are refused by ostree: only directories, regular files and symlinks; remove it", kind))
	case tar.TypeLink:
		if !e.LinkInLayer {
			r.add("hardlinks", Error, e.Path, fmt.Sprintf("hard link to %q, which is not an earlier entry of this layer: ostree cannot import it; copy the file or use a symlink", e.Linkname))
		}
	case tar.TypeReg, tar.TypeRegA, tar.TypeDir, tar.TypeSymlink:
	default:
		if e.Mode&0o140000 == 0o140000 {
			r.add("special-files", Error, e.Path, "socket entries are refused by ostree; remove it")
		}
	}
}
