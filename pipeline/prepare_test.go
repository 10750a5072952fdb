package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// TestPrepareShared: specifications prepared through one Cache resolve
// and index their base once; a plan builds the image Run builds; plans
// of the same content, base and settings into one repository have one
// identity (whatever the pool's name and tag), and the referrer mode
// alone makes another; Retag moves a tag to what a plan of that identity
// built.
func TestPrepareShared(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := regtest.Memory(t)
	img, err := synth.FCOSBase(0.0002)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Push(ctx, img, reg.Host+"/fcos/base:stable"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	osc := filepath.Join(dir, "osc.yaml")
	files := "  - path: /etc/oslayer/x\n    permissions: 420\n    content:\n      inline:\n        data: x\n"
	if err := os.WriteFile(osc, []byte(synth.OSCFiles(files)), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := func(pool, tag string) pipeline.Spec {
		return pipeline.Spec{Inputs: pipeline.Inputs{Pool: pool, OSCs: []string{osc}}, Base: reg.Host + "/fcos/base:stable",
			Target: reg.Host + "/os/images:" + tag, Registry: &registry.Options{}}
	}
	var cache pipeline.Cache
	defer cache.Close()
	prepare := func(s pipeline.Spec) *pipeline.Plan {
		t.Helper()
		p, err := pipeline.New(s, pipeline.Env{Version: "test", Cache: &cache})
		if err != nil {
			t.Fatal(err)
		}
		pl, err := p.Prepare(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	worker, edge := prepare(spec("worker", "a")), prepare(spec("edge", "b"))
	if worker.Identity == "" || worker.Identity != edge.Identity {
		t.Errorf("same content and settings: identities %q, %q", worker.Identity, edge.Identity)
	}
	withRef := spec("worker", "c")
	withRef.Signing = &pipeline.Signing{Referrers: true}
	if p, err := pipeline.New(withRef, pipeline.Env{}); err == nil {
		t.Fatalf("signing without a key accepted: %v", p)
	}
	if s := spec("worker", "c"); s.Identity() == withRef.Identity() {
		t.Error("the referrer mode does not change the specification's identity")
	}
	entries := cache.Entries()
	if len(entries) != 1 || entries[0].Builds != 2 || entries[0].Err != nil || entries[0].Index == "" {
		t.Errorf("cache entries %+v, want the base once for 2 builds, indexed", entries)
	}
	built, err := worker.Build(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := pipeline.New(spec("worker", "d"), pipeline.Env{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := plain.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if built.Digest != want.Digest {
		t.Errorf("plan built %s, Run %s", built.Digest, want.Digest)
	}
	moved, err := edge.Pipeline.Retag(ctx, built)
	if err != nil || !moved.Tagged || moved.Digest != built.Digest || moved.Target != fmt.Sprintf("%s/os/images:b", reg.Host) {
		t.Errorf("retag: %v %+v", err, moved)
	}
}
