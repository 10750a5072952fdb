package render

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/oslayer/oslayer/sources/model"

	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
)

// TestStartTarget: gardener-user.service (no [Install]; the node agent
// starts it whenever it applies the OSC) is wanted by oslayer's target,
// which multi-user.target wants; units with enablement links, disabled
// units and units the node agent stops are not. systemd-analyze verify
// loads the target and its dependencies from the rendered tree.
func TestStartTarget(t *testing.T) {
	c := fixtureCase{oscs: []string{"gardener/generated/osc-worker-a-reconcile-full.yaml"}}
	res, err := Render(context.Background(), c.request(t, fixtures.Dir(t), &fakeImages{}))
	if err != nil {
		t.Fatal(err)
	}
	e, ok := res.tree.Get(StartTargetPath)
	if !ok {
		t.Fatalf("no %s", StartTargetPath)
	}
	var wants []string
	for _, l := range strings.Split(string(e.Data), "\n") {
		if w, ok := strings.CutPrefix(l, "Wants="); ok {
			wants = append(wants, w)
		}
	}
	if strings.Join(wants, " ") != "gardener-user.service" {
		t.Errorf("%s wants %q, want only gardener-user.service", StartTarget, wants)
	}
	if l, ok := res.tree.Get(StartTargetWants); !ok || l.Target != "../"+StartTarget {
		t.Errorf("%s: %+v", StartTargetWants, l)
	}
	for _, u := range res.Report.Units {
		if (u.StartedBy != "") != (u.Name == "gardener-user.service") {
			t.Errorf("%s startedBy %q", u.Name, u.StartedBy)
		}
	}
	if !strings.Contains(strings.Join(res.Report.Warnings, "\n"), "unit gardener-user.service has no enablement links, but the node agent starts it whenever it applies the configuration: oslayer-start.target (wanted by multi-user.target) starts it at boot") {
		t.Errorf("the report does not say so: %q", res.Report.Warnings)
	}

	bin := regtest.Require(t, "systemd-analyze")
	dir := filepath.Join(t.TempDir(), "out")
	if err := res.WriteDir(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "rootfs")
	out, err := exec.Command(bin, "verify", "--root="+root, filepath.Join(root, StartTargetPath)).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze verify %s: %v\n%s", StartTarget, err, out)
	}
}

// TestStartTargetOnBase: over a known base, an OS unit without [Install]
// that the node agent restarts (systemd-sysctl.service) is wanted by the
// target; one with [Install] gets its links instead; a unit the base does
// not ship and units the node agent stops or that are disabled are not
// wanted.
func TestStartTargetOnBase(t *testing.T) {
	base := fstest.MapFS{
		"usr/lib/systemd/system/systemd-sysctl.service": {Data: []byte("[Unit]\nDescription=Apply Kernel Variables\n[Service]\nType=oneshot\nExecStart=/usr/lib/systemd/systemd-sysctl\n")},
		"usr/lib/systemd/system/containerd.service":     {Data: []byte("[Service]\nExecStart=/usr/bin/containerd\n[Install]\nWantedBy=multi-user.target\n")},
		"usr/lib/systemd/system/multi-user.target":      {Data: []byte("[Unit]\nDescription=Multi-User System\n")},
	}
	yes, no := true, false
	o := org("spec.units[0]")
	cfg := &model.Config{Units: []model.Unit{
		{Name: "systemd-sysctl.service", Enabled: &yes, StartOnApply: true, Origin: o},
		{Name: "containerd.service", Enabled: &yes, StartOnApply: true, Origin: o},
		{Name: "not-shipped.service", Enabled: &yes, StartOnApply: true, Origin: o},
		{Name: "stopped.service", Contents: ptr("[Service]\nExecStart=/bin/true\n"), Enabled: &yes, Origin: o},
		{Name: "off.service", Contents: ptr("[Service]\nExecStart=/bin/true\n"), Enabled: &no, Origin: o},
		{Name: "ignition-style.service", Contents: ptr("[Service]\nExecStart=/bin/true\n"), Enabled: &yes, Origin: o},
	}}
	res, err := RenderConfig(context.Background(), Request{Base: base}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := res.tree.Get(StartTargetPath)
	if !ok {
		t.Fatalf("no %s", StartTargetPath)
	}
	if !strings.Contains(string(e.Data), "\nWants=systemd-sysctl.service\n") || strings.Count(string(e.Data), "Wants=") != 1 {
		t.Errorf("%s:\n%s", StartTarget, e.Data)
	}
	if _, ok := res.tree.Get("/etc/systemd/system/multi-user.target.wants/containerd.service"); !ok {
		t.Errorf("containerd.service not enabled through its [Install]")
	}
}
