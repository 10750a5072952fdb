package preflight

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble"
)

func TestStage(t *testing.T) {
	b := newBase(t, 3, 1, fcosLabels)
	var _ assemble.Stage = Stage(Options{})
	t.Run("warnings pass and are logged", func(t *testing.T) {
		l := tarLayer(t, file("var/lib/kubelet/config.yaml", "x"))
		img := derive(t, b.img, l)
		var logs bytes.Buffer
		st := Stage(Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
		out, err := st.Run(context.Background(), &assemble.Built{Image: img, Base: assemble.Base{Ref: "quay.io/fedora/fedora-coreos:stable", Image: b.img}, Pool: "worker"},
			&assemble.Published{Ref: "127.0.0.1:5000/pool@sha256:abc"})
		if err != nil {
			t.Fatal(err)
		}
		rep := out.(*Report)
		if st.Name() != "preflight" || rep.Result != "passed" || rep.Warnings != 1 || rep.Image != "127.0.0.1:5000/pool@sha256:abc" || rep.Base != "quay.io/fedora/fedora-coreos:stable" {
			t.Errorf("report %+v", rep)
		}
		if !strings.Contains(logs.String(), `level=WARN msg="preflight: var/ content only lands on the first deployment`) || !strings.Contains(logs.String(), "path=var/lib/kubelet/config.yaml") {
			t.Errorf("log:\n%s", logs.String())
		}
	})
	t.Run("errors fail the stage", func(t *testing.T) {
		l := tarLayer(t, file("usr/etc/x", "x"))
		img := derive(t, b.img, l)
		out, err := Stage(Options{}).Run(context.Background(), &assemble.Built{Image: img, Base: assemble.Base{Ref: "base", Image: b.img}, Pool: "worker"}, nil)
		want := fmt.Sprintf("1 error(s) in pool worker: content/etc-usretc /usr/etc/x (layer %s): usr/etc/ is where ostree keeps the image's /etc: never write it; put the file under etc/", mustDigest(t, l)[:19])
		if err == nil || err.Error() != want {
			t.Errorf("err %v\nwant %s", err, want)
		}
		if rep, ok := out.(*Report); !ok || rep.Errors != 1 {
			t.Errorf("out %+v", out)
		}
	})
	t.Run("require-base opened with the image's platform", func(t *testing.T) {
		img := derive(t, b.img, cleanLayer(t))
		var gotRef string
		var gotPlat *v1.Platform
		st := Stage(Options{RequireBase: "official", Open: func(_ context.Context, ref string, p *v1.Platform) (v1.Image, error) {
			gotRef, gotPlat = ref, p
			return newBase(t, 3, 9, fcosLabels).img, nil
		}})
		_, err := st.Run(context.Background(), &assemble.Built{Image: img, Base: assemble.Base{Ref: "base", Image: b.img}, Pool: "worker"}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "1 error(s) in pool worker: base-layers-present: none of the 3 layers of official (preflight.requireBase)") {
			t.Errorf("err %v", err)
		}
		if gotRef != "official" || gotPlat == nil || gotPlat.String() != "linux/amd64" {
			t.Errorf("opened %q %v", gotRef, gotPlat)
		}
		st = Stage(Options{RequireBase: "gone", Open: func(context.Context, string, *v1.Platform) (v1.Image, error) { return nil, errors.New("not found") }})
		if _, err := st.Run(context.Background(), &assemble.Built{Image: img, Pool: "worker"}, nil); err == nil || err.Error() != "preflight.requireBase: gone: not found" {
			t.Errorf("err %v", err)
		}
	})
	t.Run("a check that cannot run", func(t *testing.T) {
		// The stage's error does not name the stage (the build does,
		// once); Run's does.
		img := derive(t, b.img, cleanLayer(t))
		opts := Options{Checks: []Check{brokenCheck{}}}
		_, err := Stage(opts).Run(context.Background(), &assemble.Built{Image: img, Pool: "worker"}, &assemble.Published{Ref: "r.example/pool@sha256:abc"})
		if err == nil || err.Error() != "check broken on r.example/pool@sha256:abc: unreadable" {
			t.Errorf("stage: %v", err)
		}
		_, err = Run(context.Background(), Target{Image: img, Ref: "r.example/pool@sha256:abc"}, opts)
		if err == nil || err.Error() != "preflight: check broken on r.example/pool@sha256:abc: unreadable" {
			t.Errorf("Run: %v", err)
		}
	})
	if b.reads.Load() != 0 {
		t.Errorf("base blobs read")
	}
}

// brokenCheck is a check that cannot run.
type brokenCheck struct{}

func (brokenCheck) Name() string       { return "broken" }
func (brokenCheck) Severity() Severity { return Error }
func (brokenCheck) Needs() Needs       { return 0 }
func (brokenCheck) Run(context.Context, *Target) ([]Finding, error) {
	return nil, errors.New("unreadable")
}

// TestStagesSplit: Stages runs the content checks before the write (a
// build.PreWrite stage, no base-layers check) and the checks of the
// written image after it, on the image Open reads back by digest.
func TestStagesSplit(t *testing.T) {
	b := newBase(t, 3, 1, fcosLabels)
	img := derive(t, b.img, tarLayer(t, file("usr/etc/x", "x")))
	var opened []string
	other := newBase(t, 3, 7, fcosLabels).img
	st := Stages(Options{Skip: []string{"units"}, Open: func(_ context.Context, ref string, _ *v1.Platform) (v1.Image, error) {
		opened = append(opened, ref)
		return other, nil // the registry serves something else
	}})
	if len(st) != 2 || st[0].Name() != StageName || st[1].Name() != StageWritten || !assemble.IsPreWrite(st[0]) || assemble.IsPreWrite(st[1]) {
		t.Fatalf("stages %v", st)
	}
	built := &assemble.Built{Image: img, Base: assemble.Base{Ref: "base", Image: b.img}, Pool: "worker"}
	out, err := st[0].Run(context.Background(), built, nil)
	rep, _ := out.(*Report)
	if err == nil || !strings.Contains(err.Error(), "content/etc-usretc") || rep == nil {
		t.Fatalf("content half: %v %+v", err, out)
	}
	for _, c := range rep.Checks {
		if c.Name == "base-layers-present" {
			t.Errorf("content half ran %s", c.Name)
		}
	}
	if len(opened) != 0 {
		t.Errorf("content half opened %v", opened)
	}
	d, _ := img.Digest()
	out, err = st[1].Run(context.Background(), built, &assemble.Published{Ref: "127.0.0.1:5000/pool@" + d.String(), Digest: &name.Digest{}})
	if err == nil || !strings.Contains(err.Error(), "base-layers-present") || strings.Contains(err.Error(), "content/") {
		t.Fatalf("written half: %v", err)
	}
	if rep := out.(*Report); len(rep.Checks) != 1 || rep.Checks[0].Name != "base-layers-present" {
		t.Errorf("written half checks %+v", rep.Checks)
	}
	if len(opened) != 1 || opened[0] != "127.0.0.1:5000/pool@"+d.String() {
		t.Errorf("written half opened %v", opened)
	}
}
