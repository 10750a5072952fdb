package assemble

import (
	"github.com/oslayer/oslayer/sources/model"

	"bytes"
	"context"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// baseLayerGets counts the downloads of img's layer blobs in reqs.
func baseLayerGets(t *testing.T, img v1.Image, reqs []regtest.Request) int {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range reqs {
		for _, l := range m.Layers {
			if r.Method == "GET" && strings.HasSuffix(r.Path, "/blobs/"+l.Digest.String()) {
				n++
			}
		}
	}
	return n
}

// spyRenderer records the base tree each render gets.
type spyRenderer struct{ bases []fs.FS }

func (s *spyRenderer) render(t *testing.T) renderFunc {
	return func(ctx context.Context, req render.Request) (*render.Result, error) {
		s.bases = append(s.bases, req.Base)
		return rendered(t), nil
	}
}

// The first build on a registry base reads every base layer once and
// publishes the index next to the image; later builds on that base read no
// base layer: from the artifact (a fresh cache), from the disk cache (no
// repository), and with the index off.
func TestBuildBaseIndexReadOnce(t *testing.T) {
	ctx := context.Background()
	reg := regtest.Memory(t) // the proxy counts what the client reads
	proxy := regtest.NewProxy(t, reg.Host)
	img := synthBase(t)
	if _, err := synth.Push(ctx, img, reg.Host+"/fcos/base:1"); err != nil {
		t.Fatal(err)
	}
	bd, _ := img.Digest()
	baseRef := proxy.Host + "/fcos/base@" + bd.String()
	cache1, cache2 := t.TempDir(), t.TempDir()
	repo := proxy.Host + "/pools/worker"
	spy := &spyRenderer{}
	for i, tc := range []struct {
		name       string
		index      string
		opts       IndexOptions
		wantSource string
		wantGets   int
	}{
		{"first", "", IndexOptions{CacheDir: cache1, Repository: repo}, "built", 51},
		{"artifact", "auto", IndexOptions{CacheDir: cache2, Repository: repo}, "registry", 0},
		{"disk cache", "", IndexOptions{CacheDir: cache1}, "cache", 0},
		{"off", "off", IndexOptions{CacheDir: t.TempDir(), Repository: repo}, "", 0},
	} {
		proxy.Reset()
		res, err := Build(ctx, Request{Render: render.Request{Pool: "worker"}, render: spy.render(t), Base: baseRef,
			Registry: &registry.Options{}, BaseIndex: tc.index, Index: tc.opts}, &fakePub{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := baseLayerGets(t, img, proxy.Requests()); got != tc.wantGets {
			t.Errorf("%s: %d base layer downloads, want %d\n%s", tc.name, got, tc.wantGets, proxy.Dump())
		}
		if tc.wantSource == "" {
			if res.BaseIndex != nil || spy.bases[i] != nil {
				t.Errorf("%s: index %+v, renderer base %v", tc.name, res.BaseIndex, spy.bases[i])
			}
			if !strings.Contains(strings.Join(res.Warnings, "\n"), "base index off") {
				t.Errorf("%s: warnings %q", tc.name, res.Warnings)
			}
			continue
		}
		if res.BaseIndex == nil || res.BaseIndex.Source != tc.wantSource || res.BaseIndex.Base != bd.String() {
			t.Fatalf("%s: index %+v, want source %s", tc.name, res.BaseIndex, tc.wantSource)
		}
		b, err := fs.ReadFile(spy.bases[i], "usr/lib/systemd/system/containerd.service")
		if err != nil || !bytes.Contains(b, []byte("WantedBy=multi-user.target")) {
			t.Errorf("%s: renderer's base: containerd.service %q %v", tc.name, b, err)
		}
		if tc.name == "first" && (res.BaseIndex.Published == "" || res.BaseIndex.BytesRead == 0) {
			t.Errorf("first: %+v", res.BaseIndex)
		}
	}
	if _, err := (&baseindex.Cache{Dir: cache2}).Load(bd); err != nil {
		t.Errorf("the artifact was not cached on disk: %v", err)
	}
}

// A shared Base whose Index is set is used as is; Build does not change
// the caller's Base.
func TestBuildSharedIndex(t *testing.T) {
	ctx := context.Background()
	base, err := ResolveBase(ctx, layoutBase(t, synthBase(t)), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	info, err := IndexBase(ctx, base, IndexOptions{})
	if err != nil || info.Source != "built" || base.Index == nil || len(info.Kernels) != 1 || info.Kernels[0] != synth.KernelRelease {
		t.Fatalf("IndexBase: %+v %v", info, err)
	}
	spy := &spyRenderer{}
	shared := *base
	for range 2 {
		res, err := Build(ctx, Request{Render: render.Request{Pool: "worker"}, render: spy.render(t), Prepared: []Input{{Base: &shared}}}, &fakePub{})
		if err != nil {
			t.Fatal(err)
		}
		if res.BaseIndex.Source != "given" || res.BaseIndex.Digest != base.Index.Digest {
			t.Errorf("index %+v", res.BaseIndex)
		}
	}
	if shared.Index != base.Index {
		t.Error("Build replaced the shared index")
	}
}

func TestIndexOfExampleBase(t *testing.T) {
	img, _, err := (&registry.Options{}).Image(context.Background(), "oci:"+filepath.Join("..", "examples", "base"), nil)
	if err != nil {
		t.Fatal(err)
	}
	base := &Base{Ref: "example", Image: img}
	if _, err := IndexBase(context.Background(), base, IndexOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(base.Index.FS(), "usr/lib/systemd/system/containerd.service")
	if err != nil || !bytes.Contains(b, []byte("WantedBy=multi-user.target")) {
		t.Errorf("containerd.service: %q %v", b, err)
	}
}

// A base whose layers cannot be read stops the build in the base-index
// step, before anything is rendered or written, and says how to build
// without reading the base.
func TestBuildBaseIndexUnreadable(t *testing.T) {
	ctx := context.Background()
	reg := regtest.Start(t, regtest.Config{})
	proxy := regtest.NewProxy(t, reg.Host)
	img := synthBase(t)
	bd, err := synth.Push(ctx, img, reg.Host+"/fcos/base:1")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := img.Manifest()
	last := m.Layers[len(m.Layers)-1].Digest.String()
	proxy.SetFail(func(r *http.Request) int {
		if strings.HasSuffix(r.URL.Path, "/blobs/"+last) {
			return http.StatusNotFound
		}
		return 0
	})
	pub := &fakePub{}
	spy := &spyRenderer{}
	res, err := Build(ctx, Request{Render: render.Request{Pool: "worker"}, render: spy.render(t),
		Base: proxy.Host + "/fcos/base@" + bd.DigestStr(), Registry: &registry.Options{}}, pub)
	if err == nil || !strings.HasPrefix(err.Error(), "base-index: ") || !strings.Contains(err.Error(), last) || !strings.Contains(err.Error(), "baseIndex=off") || model.IsInput(err) {
		t.Fatalf("error %v", err)
	}
	if len(spy.bases) != 0 || len(pub.calls) != 0 || res.Tagged {
		t.Errorf("rendered %d times, publisher calls %v", len(spy.bases), pub.calls)
	}
}

// With the index off, the warning names the units whose [Install] was
// assumed.
func TestOffWarningNamesAssumedUnits(t *testing.T) {
	rep := &render.Report{Units: []render.UnitReport{{Name: "a.service", InstallFrom: "fallback"}, {Name: "b.service", InstallFrom: "unit"}}}
	w := offWarning(rep)
	if !strings.Contains(w, "a.service") || strings.Contains(w, "b.service") || !strings.Contains(w, "WantedBy=multi-user.target") {
		t.Errorf("warning %q", w)
	}
	if w := offWarning(&render.Report{}); strings.Contains(w, "WantedBy") {
		t.Errorf("warning without assumed units %q", w)
	}
}

// An index published next to the base (by a pipeline that mirrors the
// base: oslayer base-index publish) serves a build into any repository
// with an empty cache: no base layer read, nothing published next to the
// image; the build after it, from the disk cache, sends no request about
// the index at all.
func TestBuildBaseIndexNextToBase(t *testing.T) {
	ctx := context.Background()
	reg := regtest.Start(t, regtest.Config{})
	proxy := regtest.NewProxy(t, reg.Host)
	img := synthBase(t)
	if _, err := synth.Push(ctx, img, reg.Host+"/fcos/base:1"); err != nil {
		t.Fatal(err)
	}
	ix, _, err := baseindex.Build(ctx, img, baseindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	baseRepo, err := name.NewRepository(reg.Host + "/fcos/base")
	if err != nil {
		t.Fatal(err)
	}
	if err := baseindex.Publish(ctx, baseRepo, ix); err != nil {
		t.Fatal(err)
	}
	bd, _ := img.Digest()
	baseRef := proxy.Host + "/fcos/base@" + bd.String()
	cache := t.TempDir()
	for _, tc := range []struct{ name, source string }{{"empty cache", "registry"}, {"disk cache", "cache"}} {
		proxy.Reset()
		res, err := Build(ctx, Request{Render: render.Request{Pool: "worker"}, render: (&spyRenderer{}).render(t), Base: baseRef,
			Registry: &registry.Options{}, Index: IndexOptions{CacheDir: cache, Repository: proxy.Host + "/pools/" + strings.ReplaceAll(tc.name, " ", "-")}}, &fakePub{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if res.BaseIndex == nil || res.BaseIndex.Source != tc.source || res.BaseIndex.Published != "" {
			t.Errorf("%s: index %+v, want source %s and nothing published", tc.name, res.BaseIndex, tc.source)
		}
		if got := baseLayerGets(t, img, proxy.Requests()); got != 0 {
			t.Errorf("%s: %d base layer downloads, want none", tc.name, got)
		}
		n := 0
		for _, r := range proxy.Requests() {
			if strings.HasSuffix(r.Path, baseindex.TagSuffix) && !strings.HasPrefix(r.Path, "/v2/fcos/base/") {
				n++
			}
		}
		if n != 0 {
			t.Errorf("%s: %d requests about the index next to the image, want none:\n%s", tc.name, n, proxy.Dump())
		}
		if tc.source == "cache" && strings.Contains(proxy.Dump(), baseindex.TagSuffix) {
			t.Errorf("%s: requests about the index:\n%s", tc.name, proxy.Dump())
		}
	}
}
