package assemble

import (
	"github.com/oslayer/oslayer/sources/model"

	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

func withArch(t *testing.T, img v1.Image, arch string) v1.Image {
	t.Helper()
	return synth.WithConfig(t, img, func(cf *v1.ConfigFile) { cf.Architecture = arch })
}

// blobGetsBut returns the blob downloads among reqs other than those of
// the allowed digests.
func blobGetsBut(reqs []regtest.Request, allowed ...v1.Hash) []regtest.Request {
	var out []regtest.Request
	for _, r := range reqs {
		if r.Method != http.MethodGet || !strings.Contains(r.Path, "/blobs/") {
			continue
		}
		ok := false
		for _, a := range allowed {
			ok = ok || strings.HasSuffix(r.Path, a.String())
		}
		if !ok {
			out = append(out, r)
		}
	}
	return out
}

// A multi-platform base: --arch picks the image, amd64 by default.
func TestResolveBaseIndex(t *testing.T) {
	ctx := context.Background()
	reg := regtest.Memory(t) // the proxy counts what the client reads
	proxy := regtest.NewProxy(t, reg.Host)
	amd := synthBase(t)
	arm := withArch(t, amd, "arm64")
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
	)
	ref, _ := name.ParseReference(reg.Host + "/fcos/multi:stable")
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	proxy.Reset()
	base := proxy.Host + "/fcos/multi:stable"
	for arch, want := range map[string]v1.Image{"": amd, "amd64": amd, "arm64": arm, "x86_64": amd, "aarch64": arm} {
		b, err := Assemble(ctx, AssembleRequest{Base: base, Arch: arch, Pool: "worker", Rendered: rendered(t), Registry: &registry.Options{}})
		if err != nil {
			t.Fatalf("arch %q: %v", arch, err)
		}
		wd, _ := want.Digest()
		if b.Base.Digest != wd {
			t.Errorf("arch %q: base %s, want %s", arch, b.Base.Digest, wd)
		}
		cf, _ := b.Image.ConfigFile()
		wantArch := registry.NormalizeArch(arch)
		if wantArch == "" {
			wantArch = "amd64"
		}
		if cf.Architecture != wantArch {
			t.Errorf("arch %q: image architecture %s", arch, cf.Architecture)
		}
	}
	_, err := ResolveBase(ctx, base, &registry.Options{}, "s390x")
	if err == nil || !strings.Contains(err.Error(), "s390x") || !strings.Contains(err.Error(), base) || !errors.Is(err, registry.ErrNoPlatform) {
		t.Errorf("s390x: %v", err)
	}
	// The base is named once, as the base (not again as "image REF").
	if err == nil || !strings.HasPrefix(err.Error(), "base "+base+": no image for platform linux/s390x") || strings.Count(err.Error(), base) != 1 {
		t.Errorf("s390x: %v, want the base named once", err)
	}
	amdCfg, _ := amd.ConfigName()
	armCfg, _ := arm.ConfigName()
	for _, r := range blobGetsBut(proxy.Requests(), amdCfg, armCfg) {
		t.Errorf("layer blob downloaded: %s", r.Path)
	}
}

// A single-architecture base must be for the architecture built for: the
// default amd64 or the arch asked for, in either spelling (aarch64/arm64,
// x86_64/amd64).
func TestResolveBaseSingleArch(t *testing.T) {
	ctx := context.Background()
	amd := layoutBase(t, synthBase(t))
	arm := layoutBase(t, withArch(t, synthBase(t), "arm64"))
	for _, c := range []struct {
		base, arch, err string
	}{
		{amd, "", ""},
		{amd, "amd64", ""},
		{amd, "x86_64", ""},
		{amd, "aarch64", `image is for architecture "amd64", arch is "aarch64"`},
		{arm, "arm64", ""},
		{arm, "aarch64", ""},
		{arm, "", `image is for architecture "arm64", and arch defaults to amd64: give arch arm64`},
		{arm, "x86_64", `arch is "x86_64"`},
	} {
		_, err := ResolveBase(ctx, c.base, nil, c.arch)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s --arch %q: %v", c.base, c.arch, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), c.base)):
			t.Errorf("%s --arch %q: %v, want an error naming the base and %q", c.base, c.arch, err, c.err)
		case c.err != "" && !model.IsInput(err):
			t.Errorf("%s --arch %q: %v is not bad input", c.base, c.arch, err)
		}
	}
}

// A base without the bootable labels still builds, with a warning.
func TestAssembleWarnsWithoutBootableLabel(t *testing.T) {
	img := synthBase(t)
	plain := synth.WithConfig(t, img, func(cf *v1.ConfigFile) {
		delete(cf.Config.Labels, "containers.bootc")
		delete(cf.Config.Labels, "ostree.bootable")
	})
	b, err := Assemble(context.Background(), AssembleRequest{Base: layoutBase(t, plain), Pool: "worker", Rendered: rendered(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Warnings) != 1 || !strings.Contains(b.Warnings[0], "neither label ostree.bootable nor containers.bootc") {
		t.Errorf("warnings %q", b.Warnings)
	}
}
