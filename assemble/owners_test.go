package assemble

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/test/synth"
)

// TestOwnerNamesThroughBaseIndex: MachineConfig user and group names
// resolve through the passwd and group files the base index recorded
// (/etc first, then the nss-altfiles copies in /usr/lib, a later layer's
// copy over an earlier one), and an unknown name is an error naming the
// document, the field and the base.
func TestOwnerNamesThroughBaseIndex(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct{ name, data string }{
		{"etc/passwd", "root:x:0:0:root:/root:/bin/bash\n"},
		{"etc/group", "root:x:0:\nwheel:x:10:core\n"},
		{"usr/lib/passwd", "core:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\nchrony:x:994:992::/var/lib/chrony:/sbin/nologin\n"},
		{"usr/lib/group", "core:x:1000:\nchrony:x:992:\n"},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f.data))
	}
	tw.Close()
	img, err := mutate.AppendLayers(synthBase(t), synth.TarLayer(t, buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	ix, _, err := baseindex.Build(context.Background(), img, baseindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mc := func(user, group string) string {
		p := filepath.Join(t.TempDir(), "50-owned.yaml")
		doc := `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-owned
  labels: {machineconfiguration.openshift.io/role: worker}
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
      - {path: /etc/chrony.d/x.conf, user: {name: ` + user + `}, group: {name: ` + group + `}, contents: {source: "data:,x"}}
`
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	req := render.Request{Pool: "worker", Base: ix.FS(), BaseName: "base quay.io/fedora/fedora-coreos:stable (sha256:abc)"}
	req.MachineConfigs = []string{mc("chrony", "wheel")}
	res, err := render.Render(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range res.Report.Baked {
		if b.Path == "/etc/chrony.d/x.conf" {
			found = true
			if b.UID != 994 || b.GID != 10 {
				t.Errorf("owner %d:%d, want 994:10", b.UID, b.GID)
			}
		}
	}
	if !found {
		t.Fatal("file not baked")
	}
	if strings.Contains(strings.Join(res.Report.Warnings, "\n"), "resolved to") {
		t.Errorf("assumed ids although the base has them: %q", res.Report.Warnings)
	}

	req.MachineConfigs = []string{mc("core", "docker")}
	_, err = render.Render(context.Background(), req)
	want := `(MachineConfig 50-owned) spec.config.storage.files[0]: /etc/chrony.d/x.conf: group.name "docker": no such group in /etc/group or /usr/lib/group of base quay.io/fedora/fedora-coreos:stable (sha256:abc)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
}
