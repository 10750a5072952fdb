package bud

import (
	"context"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble"
)

// The stage does nothing for a pool without package inputs, and refuses,
// before running anything, what it cannot build: without the executor
// (naming the build tags), without a registry target, onto a layout base.
func TestStageRefusals(t *testing.T) {
	ctx := context.Background()
	base := &assemble.Base{Ref: "127.0.0.1:5000/os/base:1", Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}}
	if res, err := New(Config{}).Run(ctx, assemble.PackageRequest{Pool: "worker", Base: base, KernelType: "default"}); res != nil || err != nil {
		t.Fatalf("no package inputs: %+v, %v", res, err)
	}
	if _, err := New(Config{Containerfile: []byte("FROM fedora\n"), ContainerfileName: "x.Containerfile"}).Run(ctx, assemble.PackageRequest{Pool: "worker", Base: base}); err == nil || !strings.Contains(err.Error(), "x.Containerfile line 1") {
		t.Errorf("bad Containerfile: %v", err)
	}
	req := assemble.PackageRequest{Pool: "worker", Base: base, Extensions: []string{"usbguard"}}
	_, err := New(Config{Repository: "127.0.0.1:5000/os/worker"}).Run(ctx, req)
	if !Enabled() {
		if err == nil || !strings.Contains(err.Error(), "built without it: build it with -tags "+Tags) || !strings.Contains(err.Error(), "extension usbguard") {
			t.Fatalf("without the executor: %v", err)
		}
		return
	}
	if _, err := New(Config{}).Run(ctx, req); err == nil || !strings.Contains(err.Error(), "give a registry target") {
		t.Errorf("no repository: %v", err)
	}
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	areq := req
	areq.Arch = other
	if _, err := New(Config{Repository: "127.0.0.1:5000/os/worker"}).Run(ctx, areq); err == nil || !strings.Contains(err.Error(), "buildah runs its steps on this machine") {
		t.Errorf("other architecture: %v", err)
	}
	lreq := req
	lreq.Base = &assemble.Base{Ref: "oci:base", Digest: base.Digest}
	if _, err := New(Config{Repository: "127.0.0.1:5000/os/worker"}).Run(ctx, lreq); err == nil || !strings.Contains(err.Error(), "is an OCI layout") {
		t.Errorf("layout base: %v", err)
	}
}

// A pool with package inputs and no base: the stage's error does not name
// the stage (the build names its step once, "package-stage: ...").
func TestStageNoBase(t *testing.T) {
	_, err := New(Config{Containerfile: []byte("FROM packages\nRUN true\n")}).Run(context.Background(), assemble.PackageRequest{Pool: "worker"})
	if err == nil || err.Error() != "no base image" {
		t.Errorf("no base: %v", err)
	}
}
