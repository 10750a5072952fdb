package registry_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/test/regtest"
)

// fullTmpfs mounts a 1 MiB tmpfs for a registry's storage; fill then
// takes its last free byte.
func fullTmpfs(t *testing.T) (dir string, fill func()) {
	t.Helper()
	regtest.RequireRoot(t, "mounts a tmpfs")
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
	return dir, func() {
		f, err := os.Create(filepath.Join(dir, "filler"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 4096)
		for i := 0; i < 1024; i++ { // 4 MiB at most: the tmpfs has 1
			if _, err := f.Write(buf); err != nil {
				break
			}
		}
		for _, n := range []int{512, 64, 1} { // the tail
			for j := 0; j < 4096; j++ {
				if _, err := f.Write(buf[:n]); err != nil {
					break
				}
			}
		}
	}
}

// TestStorageFullTmpfs: Debian's docker-registry whose filesystem storage
// (a tmpfs) has no space left answers with ENOSPC nested in
// distribution's driver error (detail.Enclosed.Err 28). A push of a new
// image and a new tag of a stored image both say the registry's disk is
// full, not "UNKNOWN: unknown error; map[... Err:28 ...]".
func TestStorageFullTmpfs(t *testing.T) {
	regtest.Require(t, "docker-registry")
	dir, fill := fullTmpfs(t)
	r := regtest.Start(t, regtest.Config{Filesystem: true, StorageDir: dir})
	opts := (&registry.Options{Retry: registry.Retry{Attempts: 1}}).RemoteOptions(context.Background())
	stored, err := random.Image(128, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.Host + "/full/pool:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, stored, opts...); err != nil {
		t.Fatalf("before the disk is full: %v", err)
	}
	fill()
	img, err := random.Image(128, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := registry.StorageFullMessage(r.Host)
	for _, c := range []struct {
		name string
		op   func() error
	}{
		{"push", func() error { return remote.Write(ref.Context().Tag("v2"), img, opts...) }},
		{"tag", func() error { return remote.Tag(ref.Context().Tag("v3"), stored, opts...) }},
	} {
		err := c.op()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s on a full disk: %v\nwant it to say %q", c.name, err, want)
		}
	}
}
