package render

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/render/varmech"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
)

// TestRootfsTmpfiles renders the full Gardener worker OSC, writes it with
// WriteDir and runs the real systemd-tmpfiles on the rootfs: every file the
// OSC puts under /var and /opt then resolves to the OSC's content with the
// OSC's mode.
func TestRootfsTmpfiles(t *testing.T) {
	bin := regtest.Require(t, "systemd-tmpfiles")
	req := fixtureCase{oscs: []string{"gardener/generated/osc-worker-a-reconcile-full.yaml"}}.request(t, fixtures.Dir(t), &fakeImages{})
	res, err := Render(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := res.WriteDir(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(out, "rootfs")
	// The FCOS layout: /opt -> var/opt.
	if err := os.Symlink("var/opt", filepath.Join(root, "opt")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--root="+root, "--create", strings.TrimPrefix(varmech.TmpfilesPath, "/usr/lib/tmpfiles.d/"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("systemd-tmpfiles: %v\n%s", err, stderr.String())
	}
	cfg := load(t, req)
	n := 0
	for _, f := range cfg.Files {
		if !strings.HasPrefix(f.Path, "/var/") && !strings.HasPrefix(f.Path, "/opt/") {
			continue
		}
		n++
		node := filepath.Join(root, f.Path)
		target, err := os.Readlink(node)
		if err != nil {
			// /opt/x is reached through the /opt symlink.
			t.Errorf("%s: not a symlink into the store: %v", f.Path, err)
			continue
		}
		if !strings.HasPrefix(target, varmech.StoreDir+"/") {
			t.Errorf("%s -> %s, not into %s", f.Path, target, varmech.StoreDir)
			continue
		}
		st := filepath.Join(root, target)
		got, err := os.ReadFile(st)
		if err != nil || !bytes.Equal(got, f.Data) {
			t.Errorf("%s: content through the link differs (%v)", f.Path, err)
		}
		fi, err := os.Stat(st)
		if err != nil || uint32(fi.Mode().Perm()) != f.Mode&0o777 {
			t.Errorf("%s: mode %v, want %04o", f.Path, fi.Mode(), f.Mode)
		}
	}
	if n < 10 {
		t.Fatalf("only %d files under /var and /opt", n)
	}
}

// TestMixedKindsConflict: Gardener and MachineConfig inputs in one render
// are an error when both claim a path with different content.
func TestMixedKindsConflict(t *testing.T) {
	dir := fixtures.Dir(t)
	req := fixtureCase{
		oscs: []string{"gardener/generated/osc-worker-a-reconcile-full.yaml"},
		mcs:  []string{"mco/aws/worker"}, pool: "worker",
	}.request(t, dir, &fakeImages{})
	out := filepath.Join(t.TempDir(), "out")
	res, err := Render(context.Background(), req)
	if err == nil {
		t.Fatalf("conflicting kinds rendered (%d layers)", len(res.Layers))
	}
	for _, want := range []string{"kubelet.service", "osc-worker-a-reconcile-full.yaml", "01-worker-kubelet.yaml"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("output written")
	}
}

func TestRenderCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := RenderConfig(ctx, Request{}, handConfig())
	if err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, err := Render(context.Background(), Request{}); err == nil || !strings.Contains(err.Error(), "nothing to render") {
		t.Fatalf("empty request: %v", err)
	}
}

func TestSummary(t *testing.T) {
	res, err := RenderConfig(context.Background(), Request{}, handConfig())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	res.Summary(&b)
	for _, want := range []string{
		"inputs: 1 document (sha256:",
		"layer payload  sha256:",
		"layer config   sha256:",
		"layer metadata sha256:",
		"runtime-delivered (not in the image): 1\n  passwd.users[0].sshAuthorizedKeys: ssh keys live under /var/home\n",
		"kernel arguments: systemd.unified_cgroup_hierarchy=1 quote\"back\\slash\n",
		"needs a package stage: extension:usbguard, kernelType:realtime\n",
		"warning: in/pool.yaml (MachineConfig 99-test) spec.config.systemd.units[1]: unit containerd.service has no contents",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}
