package assemble

import (
	"context"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/render"
)

// indexStage is a fakeStage that runs on the index too (as the
// signature does).
type indexStage struct{ fakeStage }

func (*indexStage) OnIndex() bool { return true }

// TestIndexOnePublisherOneStage: a multi-platform build goes down the
// image's path: the same publisher writes and commits each platform's
// image and then the index (a Built that IsIndex), the stages run on
// each platform image, and only those that implement OnIndex run on the
// index, before its tag moves; Retag commits the index through the same
// publisher.
func TestIndexOnePublisherOneStage(t *testing.T) {
	ctx := context.Background()
	ref := layoutBase(t, synthBase(t))
	pub := &fakePub{}
	base, err := ResolveBase(ctx, ref, &registry.Options{}, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	// One platform prepared: ArchAll takes the prepared platforms (the
	// base's index is not read for them).
	req := Request{
		Render: render.Request{Pool: "worker"}, Arch: OnePlatform(ArchAll),
		Prepared: []Input{{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Base: base, Rendered: rendered(t)}},
	}
	res, err := Build(ctx, req, pub, &fakeStage{name: "preflight", pub: pub}, &indexStage{fakeStage{name: "sign", pub: pub}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(pub.calls, ","), "write,preflight,sign,write,sign,commit"; got != want {
		t.Errorf("calls %s, want %s", got, want)
	}
	ix := pub.written
	if !ix.IsIndex() || len(ix.Platforms) != 1 || ix.Digest != res.Digest || ix.Platforms[0].Digest != res.Platforms[0].Digest {
		t.Fatalf("written %+v, result %+v", ix, res)
	}
	if !res.IsIndex() || !res.Tagged || res.Stages["sign"] == nil || res.Stages["preflight"] != nil || res.Platforms[0].Stages["preflight"] == nil {
		t.Errorf("result %+v", res)
	}
	moved := &fakePub{}
	if _, err := Retag(ctx, res, moved); err != nil || strings.Join(moved.calls, ",") != "commit" {
		t.Errorf("retag: %v, calls %v", err, moved.calls)
	}
}
