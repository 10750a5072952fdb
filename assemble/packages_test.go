package assemble

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/oslayer/oslayer/render"
)

// layoutStage is a package stage that derives the package base from the
// official base in an OCI layout: one layer appended (as buildah's RUN
// would), written into the layout and returned by digest.
type layoutStage struct {
	t    *testing.T
	dir  string
	reqs []PackageRequest
	err  error
	none bool
	// partial is what a failing stage returns with err.
	partial *PackageResult
}

func (s *layoutStage) Run(ctx context.Context, req PackageRequest) (*PackageResult, error) {
	s.reqs = append(s.reqs, req)
	if s.err != nil || s.none {
		return s.partial, s.err
	}
	hl := handLayer(s.t, "packages", map[string]string{"usr/bin/agent": "#!/bin/sh\n"})
	l, err := tarball.LayerFromOpener(func() (r io.ReadCloser, err error) { return io.NopCloser(bytes.NewReader(hl.Gzip)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(req.Base.Image, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: "RUN rpm -i agent.rpm"}})
	if err != nil {
		return nil, err
	}
	p, err := layout.FromPath(s.dir)
	if err != nil {
		return nil, err
	}
	if err := p.AppendImage(img); err != nil {
		return nil, err
	}
	d, _ := img.Digest()
	return &PackageResult{Key: "sha256:" + strings.Repeat("0", 64), Ref: "oci:" + s.dir + "@" + d.String(),
		Layers: []AddedLayer{{Digest: hl.Digest, DiffID: hl.DiffID, Size: hl.Size, Source: "RUN rpm -i agent.rpm"}}}, nil
}

// A pool with extensions gets its config layers on the package base the
// stage returns; the render is redone onto the package base's index; the
// result names the official base and the stage.
func TestBuildOntoPackageBase(t *testing.T) {
	ctx := context.Background()
	ref := layoutBase(t, synthBase(t))
	r := rendered(t)
	r.Packages, r.Extensions, r.KernelType = []string{"extension:usbguard", "kernelType:realtime"}, []string{"usbguard"}, "realtime"
	var renders []string
	renderer := func(ctx context.Context, req render.Request) (*render.Result, error) {
		renders = append(renders, req.BaseName)
		return r, nil
	}
	st := &layoutStage{t: t, dir: strings.TrimPrefix(ref, "oci:")}
	pub := &fakePub{}
	res, err := Build(ctx, Request{Render: render.Request{Pool: "worker"}, render: renderer, Base: ref, Packages: st}, pub)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.reqs) != 1 || st.reqs[0].Pool != "worker" || strings.Join(st.reqs[0].Extensions, ",") != "usbguard" || st.reqs[0].KernelType != "realtime" || st.reqs[0].Base.Ref != ref {
		t.Fatalf("stage requests %+v", st.reqs)
	}
	official, _ := synthBase(t).Digest()
	if res.Base.Digest != official || res.PackageStage == nil || !strings.HasPrefix(res.PackageStage.Ref, "oci:") {
		t.Fatalf("result base %+v, stage %+v", res.Base, res.PackageStage)
	}
	if len(renders) != 2 || !strings.Contains(renders[1], res.PackageStage.Ref) {
		t.Fatalf("renders onto %q, want the official base, then the package base", renders)
	}
	b := pub.written
	if b.Official == nil || b.Official.Digest != official || b.Base.Ref != res.PackageStage.Ref {
		t.Fatalf("built on %+v, official %+v", b.Base, b.Official)
	}
	// Layers: the official base's, the package layer, the config layers.
	bm, _ := synthBase(t).Manifest()
	m, _ := b.Image.Manifest()
	if len(m.Layers) != len(bm.Layers)+1+len(r.Layers) {
		t.Fatalf("%d layers, base has %d", len(m.Layers), len(bm.Layers))
	}
	for i, l := range bm.Layers {
		if m.Layers[i].Digest != l.Digest {
			t.Fatalf("layer %d is %s, the official base's is %s", i, m.Layers[i].Digest, l.Digest)
		}
	}
	if m.Layers[len(bm.Layers)].Digest != res.PackageStage.Layers[0].Digest {
		t.Fatal("the package layer is not right after the official base's")
	}
	var phases []string
	for _, p := range res.Phases {
		phases = append(phases, p.Name)
	}
	if got := strings.Join(phases, ","); got != "base,base-index,render,package-stage,package-base,base-index,render,assemble,push,tag" {
		t.Errorf("phases %s", got)
	}
}

// Without a stage, or with one that has nothing to do, a pool that needs
// packages is refused; a failing stage stops the build before anything is
// written.
func TestBuildPackagesRefused(t *testing.T) {
	ctx := context.Background()
	ref := layoutBase(t, synthBase(t))
	r := rendered(t)
	r.Packages, r.Extensions = []string{"extension:usbguard"}, []string{"usbguard"}
	for _, tc := range []struct {
		name  string
		stage PackageStage
		want  string
	}{
		{"no stage", nil, "extension:usbguard need the package stage"},
		{"stage without inputs", &layoutStage{t: t, none: true}, "extension:usbguard need the package stage"},
		{"failing stage", &layoutStage{t: t, err: errors.New("agent.Containerfile line 3: RUN exit 3: exit status 3")}, "package-stage: agent.Containerfile line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub := &fakePub{}
			res, err := Build(ctx, Request{Render: render.Request{Pool: "worker"}, render: fixedRenderer(r, nil), Base: ref, Packages: tc.stage}, pub)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if tc.stage == nil && !errors.Is(err, ErrNoPackageStage) {
				t.Errorf("error %v is not ErrNoPackageStage", err)
			}
			if len(pub.calls) != 0 || res.Tagged {
				t.Errorf("publisher calls %v", pub.calls)
			}
		})
	}
}

// A build whose package stage fails says how far it got: the resolved
// base, the stage's partial result, and no empty digest (not ":").
func TestFailedPackageStageResult(t *testing.T) {
	ctx := context.Background()
	ref := layoutBase(t, synthBase(t))
	r := rendered(t)
	r.Packages, r.Extensions = []string{"extension:usbguard"}, []string{"usbguard"}
	renderer := func(ctx context.Context, req render.Request) (*render.Result, error) { return r, nil }
	partial := &PackageResult{Key: "sha256:" + strings.Repeat("1", 64), Commands: []string{"FROM packages", "RUN exit 3"},
		Phases: []Phase{{Name: "lookup"}, {Name: "build"}}}
	st := &layoutStage{t: t, dir: strings.TrimPrefix(ref, "oci:"), err: errors.New("RUN exit 3: exit status 3"), partial: partial}
	res, err := Build(ctx, Request{Render: render.Request{Pool: "worker"}, render: renderer, Base: ref, Packages: st}, &fakePub{})
	if err == nil {
		t.Fatal("a failing package stage built")
	}
	official, _ := synthBase(t).Digest()
	if res.Base.Ref != ref || res.Base.Digest != official || res.PackageStage != partial || res.Tagged {
		t.Fatalf("result base %+v, stage %+v, tagged %v", res.Base, res.PackageStage, res.Tagged)
	}
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(out, &top); err != nil {
		t.Fatal(err)
	}
	if _, ok := top["digest"]; ok || bytes.Contains(out, []byte(`"digest":":"`)) || !bytes.Contains(out, []byte(`"packageStage":{`)) || !bytes.Contains(out, []byte(official.String())) {
		t.Errorf("-o json of a failed build:\n%s", out)
	}
}
