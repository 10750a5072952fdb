package systemd

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/oslayer/oslayer/test/regtest"
)

// overlayFixture is a base tree on disk and a configuration tree in memory.
func overlayFixture(t *testing.T) (lowerFiles map[string]string, upper fstest.MapFS) {
	t.Helper()
	lowerFiles = map[string]string{
		"usr/lib/systemd/system/containerd.service":           svc + "[Install]\nWantedBy=multi-user.target\n",
		"usr/lib/systemd/system/containerd.service.d/10.conf": "[Install]\nWantedBy=hidden-by-etc.target\n",
		"usr/lib/systemd/system/containerd.service.d/20.conf": "[Install]\nRequiredBy=base-dropin.target\n",
		"etc/systemd/system/other.service":                    svc + "[Install]\nWantedBy=other.target\n",
		"usr/lib/systemd/system/getty@.service":               svc + "[Install]\nWantedBy=getty.target\nDefaultInstance=tty1\n",
		"usr/lib/systemd/system/shadowed.service":             svc + "[Install]\nWantedBy=base.target\n",
	}
	upper = fstest.MapFS{
		"etc/systemd/system/kubelet.service":                {Data: []byte(svc + "[Install]\nWantedBy=multi-user.target\nAlso=containerd.service\n"), Mode: 0o644},
		"etc/systemd/system/containerd.service.d/10.conf":   {Data: []byte("[Install]\nWantedBy=config.target\n"), Mode: 0o644},
		"etc/systemd/system/shadowed.service":               {Data: []byte(svc + "[Install]\nWantedBy=config.target\n"), Mode: 0o644},
		"etc/systemd/system/getty@.service.d/override.conf": {Data: []byte("[Install]\nDefaultInstance=ttyS0\n"), Mode: 0o644},
		"etc/systemd/system/kube-alias.service":             {Data: []byte("kubelet.service"), Mode: fs.ModeSymlink | 0o777},
	}
	return lowerFiles, upper
}

func TestOverlay(t *testing.T) {
	lowerFiles, upper := overlayFixture(t)
	lowerDir := t.TempDir()
	writeTree(t, lowerDir, lowerFiles)
	o := Overlay(upper, os.DirFS(lowerDir))
	if err := fstest.TestFS(o, "etc/systemd/system/kubelet.service", "etc/systemd/system/other.service",
		"usr/lib/systemd/system/containerd.service.d/20.conf", "etc/systemd/system/containerd.service.d/10.conf"); err != nil {
		t.Fatal(err)
	}
	entries, err := fs.ReadDir(o, "etc/systemd/system")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"containerd.service.d", "getty@.service.d", "kube-alias.service", "kubelet.service", "other.service", "shadowed.service"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("merged dir %v, want %v", names, want)
	}
	u, ok := FindInFS(o, "containerd.service")
	if !ok || u.Path != "/usr/lib/systemd/system/containerd.service" ||
		!reflect.DeepEqual(u.Install.WantedBy, []string{"multi-user.target", "config.target"}) ||
		!reflect.DeepEqual(u.Install.RequiredBy, []string{"base-dropin.target"}) {
		t.Errorf("containerd: %+v %v", u, ok)
	}
	// A symlink in /etc/systemd/system to a unit of the search path:
	// systemctl refuses it.
	if _, err := LoadFromFS(o, "kube-alias.service"); !errors.Is(err, ErrLinked) {
		t.Errorf("alias in /etc: %v", err)
	}
	if u, ok := FindInFS(o, "shadowed.service"); !ok || u.Path != "/etc/systemd/system/shadowed.service" {
		t.Errorf("shadowed: %+v %v", u, ok)
	}
	if _, err := fs.ReadDir(o, "etc/systemd/system/kubelet.service"); err == nil {
		t.Error("ReadDir of a file")
	}
	if _, err := o.Open("/etc"); err == nil {
		t.Error("invalid path accepted")
	}
	if _, ok := FindInFS(Overlay(nil, nil), "x.service"); ok {
		t.Error("empty overlay finds a unit")
	}
}

// TestOracleOverlay materialises base + configuration in one directory and
// compares enabling through Overlay with systemctl there.
func TestOracleOverlay(t *testing.T) {
	bin := regtest.Require(t, "systemctl")
	lowerFiles, upper := overlayFixture(t)
	lowerDir := t.TempDir()
	writeTree(t, lowerDir, lowerFiles)
	o := Overlay(upper, os.DirFS(lowerDir))
	for _, name := range []string{"kubelet.service", "containerd.service", "other.service", "getty@.service", "getty@tty5.service", "shadowed.service", "kube-alias.service"} {
		t.Run(name, func(t *testing.T) {
			merged := t.TempDir()
			writeTree(t, merged, lowerFiles)
			files := map[string]string{}
			for p, f := range upper {
				if f.Mode&fs.ModeSymlink != 0 {
					files[p] = "->" + string(f.Data)
				} else {
					files[p] = string(f.Data)
				}
			}
			for p := range files {
				if _, err := os.Lstat(filepath.Join(merged, p)); err == nil {
					if err := os.Remove(filepath.Join(merged, p)); err != nil {
						t.Fatal(err)
					}
				}
			}
			writeTree(t, merged, files)
			want, out, failed := systemctlEnable(t, bin, merged, name)
			var got []Link
			u, err := LoadFromFS(o, name)
			if err == nil {
				got, err = EnableLinks(u, FSLookup(o))
			}
			if failed != (err != nil) || !equalLinks(got, want) {
				t.Errorf("ours %v (%v)\nsystemctl %v (failed=%v)\n%s", got, err, want, failed, strings.TrimSpace(out))
			}
		})
	}
}
