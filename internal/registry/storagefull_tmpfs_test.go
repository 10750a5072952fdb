package registry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/test/regtest"
)

// TestStorageFullTmpfs: Debian's docker-registry whose filesystem storage
// (a tmpfs) has no space left answers with ENOSPC nested in
// distribution's driver error (detail.Enclosed.Err 28). A push of a new
// image and a new tag of a stored image both say the registry's disk is
// full, not "UNKNOWN: unknown error; map[... Err:28 ...]".
func TestStorageFullTmpfs(t *testing.T) {
	regtest.Require(t, "docker-registry")
	dir, fill := regtest.SmallTmpfs(t)
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
