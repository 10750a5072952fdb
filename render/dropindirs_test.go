package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/oslayer/oslayer/sources/gardener"
	"github.com/oslayer/oslayer/sources/model"
)

// TestClearDropInDirs: gardener-node-agent removes the /etc drop-in
// directory of a unit that has no drop-ins before it enables the unit: the
// image removes the base's directory with a whiteout, and the [Install]
// lines of the removed drop-ins do not enable anything. A unit with drop-ins
// and a MachineConfig unit leave the base's directory alone.
func TestClearDropInDirs(t *testing.T) {
	base := fstest.MapFS{
		"usr/lib/systemd/system/containerd.service":            {Data: []byte("[Service]\nExecStart=/usr/bin/containerd\n[Install]\nWantedBy=multi-user.target\n")},
		"etc/systemd/system/containerd.service.d/50-base.conf": {Data: []byte("[Install]\nWantedBy=extra.target\n")},
		"usr/lib/systemd/system/kubelet.service":               {Data: []byte("[Service]\nExecStart=/usr/bin/kubelet\n")},
		"etc/systemd/system/kubelet.service.d/50-base.conf":    {Data: []byte("[Service]\nEnvironment=A=1\n")},
		"usr/lib/systemd/system/chronyd.service":               {Data: []byte("[Service]\nExecStart=/usr/sbin/chronyd\n[Install]\nWantedBy=multi-user.target\n")},
		"etc/systemd/system/chronyd.service.d/50-base.conf":    {Data: []byte("[Service]\nEnvironment=B=1\n")},
		"usr/lib/systemd/system/multi-user.target":             {Data: []byte("[Unit]\n")},
		"usr/lib/systemd/system/extra.target":                  {Data: []byte("[Unit]\n")},
	}
	doc := `apiVersion: extensions.gardener.cloud/v1alpha1
kind: OperatingSystemConfig
metadata: {name: osc}
spec:
  type: coreos
  purpose: reconcile
  units:
  - name: containerd.service
    command: restart
  - name: kubelet.service
    dropIns: [{name: 10-x.conf, content: "[Service]\nEnvironment=X=1\n"}]
`
	cfg, err := gardener.Decode(context.Background(), "osc.yaml", []byte(doc), gardener.Options{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	cfg.Units = append(cfg.Units, model.Unit{Name: "chronyd.service", Enabled: &yes, Origin: org("spec.config.systemd.units[0]")})
	res, err := RenderConfig(context.Background(), Request{Base: base}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range res.Layers {
		zr, err := gzip.NewReader(bytes.NewReader(l.Gzip))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for h, err := tr.Next(); err == nil; h, err = tr.Next() {
			if strings.Contains(h.Name, ".wh.") {
				names = append(names, h.Name)
			}
		}
	}
	if !slices.Equal(names, []string{"etc/systemd/system/.wh.containerd.service.d"}) {
		t.Errorf("whiteouts %q, want only containerd.service.d", names)
	}
	if _, ok := res.tree.Get("/etc/systemd/system/extra.target.wants/containerd.service"); ok {
		t.Errorf("the removed drop-in's [Install] enabled containerd.service into extra.target")
	}
	if _, ok := res.tree.Get("/etc/systemd/system/multi-user.target.wants/containerd.service"); !ok {
		t.Errorf("containerd.service not enabled through its own [Install]")
	}
	if !strings.Contains(strings.Join(res.Report.Warnings, "\n"), "unit containerd.service has no drop-ins: the node agent removes /etc/systemd/system/containerd.service.d, which the base image ships; the image removes it too") {
		t.Errorf("warnings %q", res.Report.Warnings)
	}
}
