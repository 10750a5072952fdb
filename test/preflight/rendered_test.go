package preflight_test

import (
	"context"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/synth"
)

// stubImages serves Gardener imageRef files (binaries pulled from images)
// without a registry.
type stubImages struct{}

func (stubImages) ReadFile(_ context.Context, image, path string) ([]byte, uint32, string, error) {
	return []byte("\x7fELF stub of " + path), 0o755, image + "@sha256:" + strings.Repeat("0", 64), nil
}

// TestRenderedPools: the pools oslayer renders from the real fixtures pass
// preflight on an FCOS-shaped base. The OpenShift pull secret
// (/var/lib/kubelet/config.json) is not baked by default; baked on purpose
// (bakeSecrets) it is reported until allowed.
func TestRenderedPools(t *testing.T) {
	base, err := synth.FCOSBase(0.001)
	if err != nil {
		t.Fatal(err)
	}
	d, err := base.Digest()
	if err != nil {
		t.Fatal(err)
	}
	buildImage := func(req render.Request) *assemble.Built {
		t.Helper()
		r, err := render.Render(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := assemble.Assemble(context.Background(), assemble.AssembleRequest{BaseImage: &assemble.Base{Ref: "synth", Digest: d, Image: base}, Pool: "worker", Rendered: r})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	stage := func(b *assemble.Built, o preflight.Options) (*preflight.Report, error) {
		out, err := preflight.Stage(o).Run(context.Background(), b, nil)
		rep, _ := out.(*preflight.Report)
		return rep, err
	}

	t.Run("gardener", func(t *testing.T) {
		b := buildImage(render.Request{OSCs: []string{fixtures.Path(t, "gardener", "generated", "osc-worker-a-reconcile-full.yaml")}, Images: stubImages{}})
		rep, err := stage(b, preflight.Options{})
		if err != nil || rep.Errors != 0 || rep.Warnings != 0 || len(rep.Findings) != 0 || len(rep.AddedLayers) != len(b.Added) {
			t.Fatalf("err %v, report %+v", err, rep)
		}
	})
	t.Run("openshift", func(t *testing.T) {
		b := buildImage(render.Request{MachineConfigs: []string{fixtures.Path(t, "mco", "aws", "worker")}, Pool: "worker"})
		if rep, err := stage(b, preflight.Options{}); err != nil || rep.Errors != 0 || len(rep.Findings) != 0 {
			t.Fatalf("without the pull secret: err %v, report %+v", err, rep)
		}
		b = buildImage(render.Request{MachineConfigs: []string{fixtures.Path(t, "mco", "aws", "worker")}, Pool: "worker", BakeSecrets: true})
		rep, err := stage(b, preflight.Options{})
		if err == nil || rep == nil || rep.Errors != 1 || len(rep.Findings) != 1 {
			t.Fatalf("err %v, report %+v", err, rep)
		}
		f := rep.Findings[0]
		if f.Check != "secrets" || !strings.HasSuffix(f.Path, "var/lib/kubelet/config.json") || !strings.HasPrefix(f.Message, "holds registry credentials (auths for ") {
			t.Fatalf("finding %+v", f)
		}
		rep, err = stage(b, preflight.Options{AllowSecrets: []string{"/" + f.Path}})
		if err != nil || rep.Errors != 0 || rep.Infos != 1 {
			t.Fatalf("with --allow-secret: err %v, report %+v", err, rep)
		}
		// The path as on the node, as a user writes it.
		rep, err = stage(b, preflight.Options{AllowSecrets: []string{"/var/lib/kubelet/config.json"}})
		if err != nil || rep.Errors != 0 || rep.Infos != 1 || !strings.HasSuffix(rep.Findings[0].Message, "allowed by preflight.allowSecrets /var/lib/kubelet/config.json (its node path /var/lib/kubelet/config.json)") {
			t.Fatalf("with --allow-secret /var/lib/kubelet/config.json: err %v, report %+v", err, rep)
		}
	})
}
