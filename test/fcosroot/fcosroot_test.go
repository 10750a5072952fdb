package fcosroot

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteTreeModes: the sticky /tmp and the 0700 /root target keep their
// modes, and the /var symlinks are links.
func TestWriteTreeModes(t *testing.T) {
	d := t.TempDir()
	WriteTree(t, d, Skeleton())
	fi, err := os.Stat(filepath.Join(d, "tmp"))
	if err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("/tmp: %v %v, want sticky 0777", fi.Mode(), err)
	}
	for _, l := range []string{"opt", "root", "home", "srv", "mnt", "usr/local"} {
		if target, err := os.Readlink(filepath.Join(d, l)); err != nil || filepath.Base(filepath.Dir(target)) != "var" {
			t.Errorf("/%s -> %q (%v), want a link into var", l, target, err)
		}
	}
}
