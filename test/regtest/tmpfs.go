package regtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// SmallTmpfs mounts a 1 MiB tmpfs (root only; the test skips otherwise)
// for a registry's storage (Config.StorageDir), unmounted when the test
// ends. fill takes its last free byte: the registry's disk is then full.
func SmallTmpfs(t *testing.T) (dir string, fill func()) {
	t.Helper()
	RequireRoot(t, "mounts a tmpfs")
	dir = t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "oslayer-test", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v\n%s", err, out)
	}
	// Registered after t.TempDir: runs before its removal.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
	return dir, func() { fillDisk(t, filepath.Join(dir, "filler")) }
}

// fillDisk writes path until its filesystem has no byte left (at most
// 4 MiB in 4 KiB writes, then smaller ones for the tail).
func fillDisk(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for i := 0; i < 1024; i++ {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	for _, n := range []int{512, 64, 1} {
		for j := 0; j < 4096; j++ {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
}
