//go:build containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package bud

import (
	"context"
	"net"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/packagestage"
)

// The stage's errors do not name the stage (the build names its step
// once, "package-stage: "); Run's start with "package stage: ". The
// registry refuses connections, so the look for the package base fails
// before buildah runs.
func TestStageErrorsUnprefixed(t *testing.T) {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close()
	base := &assemble.Base{Ref: host + "/os/base:1", Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}}
	reg := &registry.Options{Retry: registry.Retry{Attempts: 1}}
	c := Config{Containerfile: []byte("FROM packages\nRUN true\n"), Repository: host + "/os/packages", Registry: reg}
	req := assemble.PackageRequest{Pool: "worker", Base: base}
	_, err = New(c).Run(ctx, req)
	if err == nil || !strings.HasPrefix(err.Error(), "looking up "+host+"/os/packages:") {
		t.Errorf("stage: %v", err)
	}
	plan, err := packagestage.NewPlan(base.Digest, New(c).Inputs(req), "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(ctx, Options{Plan: plan, Base: base.Ref, Repository: c.Repository, Registry: reg})
	if err == nil || !strings.HasPrefix(err.Error(), "package stage: looking up "+host+"/os/packages:") {
		t.Errorf("Run: %v", err)
	}
}
