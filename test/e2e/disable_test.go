package e2e

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// enabledBaseLayer is a layer of OS units with [Install] sections and the
// enablement links a base image has in /etc after `systemctl preset-all`:
// a service, a socket with Also=, an alias, a template instance and a
// wants directory that only the socket uses.
func enabledBaseLayer(t *testing.T) []byte {
	t.Helper()
	const usr, etc = "usr/lib/systemd/system/", "etc/systemd/system/"
	unit := func(install string) string {
		return "[Service]\nExecStart=/usr/bin/true\n[Install]\n" + install + "\n"
	}
	files := []struct{ name, data, link string }{
		{name: etc},
		{name: etc + "getty.target.wants/"},
		{name: etc + "multi-user.target.wants/"},
		{name: etc + "sockets.target.wants/"},
		{name: usr + "sshd.service", data: unit("WantedBy=multi-user.target")},
		{name: usr + "rpcbind.socket", data: "[Socket]\nListenStream=/run/rpcbind.sock\n[Install]\nWantedBy=sockets.target\nAlso=rpcbind.service"},
		{name: usr + "rpcbind.service", data: unit("WantedBy=multi-user.target")},
		{name: usr + "dbus-broker.service", data: unit("WantedBy=multi-user.target\nAlias=dbus.service")},
		{name: usr + "zincati.service", data: unit("WantedBy=multi-user.target")},
		{name: usr + "serial-getty@.service", data: unit("WantedBy=getty.target")},
		{name: usr + "multi-user.target", data: "[Unit]\nDescription=Multi-User System\n"},
		{name: "usr/lib/systemd/system-preset/"},
		{name: "usr/lib/systemd/system-preset/90-default.preset", data: "enable sshd.service\nenable rpcbind.*\nenable chronyd.service\nenable containerd.service\nenable dbus-broker.service\nenable zincati.service\nenable serial-getty@.service ttyS0 ttyS1\n"},
		{name: "usr/lib/systemd/system-preset/99-default-disable.preset", data: "disable *\n"},
		{name: etc + "dbus.service", link: "/usr/lib/systemd/system/dbus-broker.service"},
		{name: etc + "getty.target.wants/serial-getty@ttyS0.service", link: "/usr/lib/systemd/system/serial-getty@.service"},
		{name: etc + "getty.target.wants/serial-getty@ttyS1.service", link: "/usr/lib/systemd/system/serial-getty@.service"},
		{name: etc + "multi-user.target.wants/chronyd.service", link: "/usr/lib/systemd/system/chronyd.service"},
		{name: etc + "multi-user.target.wants/containerd.service", link: "/usr/lib/systemd/system/containerd.service"},
		{name: etc + "multi-user.target.wants/dbus-broker.service", link: "/usr/lib/systemd/system/dbus-broker.service"},
		{name: etc + "multi-user.target.wants/rpcbind.service", link: "/usr/lib/systemd/system/rpcbind.service"},
		{name: etc + "multi-user.target.wants/sshd.service", link: "/usr/lib/systemd/system/sshd.service"},
		{name: etc + "multi-user.target.wants/zincati.service", link: "/usr/lib/systemd/system/zincati.service"},
		{name: etc + "sockets.target.wants/rpcbind.socket", link: "/usr/lib/systemd/system/rpcbind.socket"},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(f.data)), ModTime: synth.Epoch}
		switch {
		case strings.HasSuffix(f.name, "/"):
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case f.link != "":
			h.Typeflag, h.Mode, h.Linkname = tar.TypeSymlink, 0o777, f.link
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// unitTree lists etc/systemd/system under root: directories, and symlinks
// with their targets.
func unitTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	dir := filepath.Join(root, "etc", "systemd", "system")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.IsDir():
			out = append(out, rel+"/")
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out = append(out, rel+" -> "+target)
		default:
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestDisabledUnitsOnUnpackedImage builds, onto a base (OCI layout) whose
// /etc has enablement links, a MachineConfig pool and a Gardener OSC that
// disable OS units (the MachineConfig also masks one), unpacks the final
// image with umoci, and requires its /etc/systemd/system to be exactly what
// the real `systemctl --root disable` (and `mask`) of the same units leaves
// on the unpacked base.
func TestDisabledUnitsOnUnpackedImage(t *testing.T) {
	regtest.Require(t, "umoci")
	systemctl := regtest.Require(t, "systemctl")
	img, err := mutate.AppendLayers(synthBase(t), synth.TarLayer(t, enabledBaseLayer(t)))
	if err != nil {
		t.Fatal(err)
	}
	baseDir := filepath.Join(t.TempDir(), "base")
	lp, err := layout.Write(baseDir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "stable"})); err != nil {
		t.Fatal(err)
	}
	disabled := []string{"sshd.service", "rpcbind.socket", "chronyd.service", "serial-getty@ttyS1.service", "dbus.service", "absent.service"}
	dir := t.TempDir()
	var mcUnits, oscUnits strings.Builder
	for _, u := range disabled {
		mcUnits.WriteString("      - name: " + u + "\n        enabled: false\n")
		oscUnits.WriteString("  - name: " + u + "\n    enable: false\n")
	}
	// The MachineConfig also masks an OS unit the base enables: the mask
	// link comes, the enablement link stays, as with systemctl mask.
	masked := []string{"zincati.service"}
	for _, u := range masked {
		mcUnits.WriteString("      - name: " + u + "\n        mask: true\n")
	}
	mc := filepath.Join(dir, "99-worker-disable.yaml")
	osc := filepath.Join(dir, "osc.yaml")
	for p, doc := range map[string]string{
		mc: "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-worker-disable\n  labels:\n    machineconfiguration.openshift.io/role: worker\n" +
			"spec:\n  config:\n    ignition:\n      version: 3.4.0\n    systemd:\n      units:\n" + mcUnits.String(),
		osc: "apiVersion: extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfig\nmetadata:\n  name: worker\n  namespace: shoot--x--y\nspec:\n  type: coreos\n  purpose: reconcile\n  units:\n" + oscUnits.String(),
	} {
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The oracle: the unpacked base after systemctl disable (and mask).
	oracle := func(t *testing.T, mask []string) []string {
		baseBundle := filepath.Join(t.TempDir(), "bundle")
		run(t, "umoci", "unpack", "--rootless", "--image", baseDir+":stable", baseBundle)
		oracleRoot := filepath.Join(baseBundle, "rootfs")
		before := unitTree(t, oracleRoot)
		run(t, systemctl, append([]string{"--root=" + oracleRoot, "--no-reload", "disable"}, disabled...)...)
		if len(unitTree(t, oracleRoot)) >= len(before) {
			t.Fatalf("systemctl disable removed nothing:\n%s", strings.Join(before, "\n"))
		}
		if len(mask) > 0 {
			run(t, systemctl, append([]string{"--root=" + oracleRoot, "--no-reload", "mask"}, mask...)...)
		}
		return unitTree(t, oracleRoot)
	}

	for name, c := range map[string]struct {
		rreq render.Request
		mask []string
	}{
		"machineconfig": {render.Request{MachineConfigs: []string{mc}, Pool: "worker"}, masked},
		"gardener":      {render.Request{OSCs: []string{osc}, Pool: "worker"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			rreq, want := c.rreq, oracle(t, c.mask)
			out := filepath.Join(t.TempDir(), "out")
			pub, err := publish.New("oci:"+out, &registry.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := assemble.Build(ctxT(t), assemble.Request{Render: rreq, Base: "oci:" + baseDir + ":stable", Registry: &registry.Options{}, Version: "e2e"}, pub)
			if err != nil {
				t.Fatal(err)
			}
			bundle := filepath.Join(t.TempDir(), "bundle")
			run(t, "umoci", "unpack", "--rootless", "--image", out+":latest", bundle)
			got := unitTree(t, filepath.Join(bundle, "rootfs"))
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("etc/systemd/system of the image differs from systemctl disable (and mask) on the base:\n image:\n  %s\n systemctl:\n  %s",
					strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			var whiteouts int
			for _, b := range res.Report.Baked {
				if b.Type == "whiteout" {
					whiteouts++
				}
			}
			if whiteouts == 0 {
				t.Error("the report lists no whiteout")
			}
			t.Logf("%s: %d whiteouts; etc/systemd/system has %d entries, as systemctl disable leaves it", name, whiteouts, len(got))

			// A first boot applies the presets (enable-only unless systemd
			// is built with first-boot-full-preset): the units the
			// configuration disabled stay disabled, in either mode, as the
			// vendor presets' "enable" lines lose to oslayer's preset file.
			// (Presets name units, not what their disable removed: an
			// instance of an enabled template, the unit behind an alias and
			// an Also= unit the vendor presets enable come back, as they do
			// after Ignition's preset file.)
			for _, mode := range []string{"enable-only", "full"} {
				root := filepath.Join(t.TempDir(), "bundle")
				run(t, "umoci", "unpack", "--rootless", "--image", out+":latest", root)
				root = filepath.Join(root, "rootfs")
				before := unitTree(t, root)
				run(t, systemctl, "--root="+root, "--no-reload", "preset-all", "--preset-mode="+mode)
				after := unitTree(t, root)
				links := strings.Join(after, "\n")
				if mode == "enable-only" {
					// The report's first-boot links are what systemctl adds
					// (paths: Debian's systemctl links through /lib, a
					// split-usr search path FCOS does not have).
					var added, reported []string
					for _, l := range after {
						if p, _, ok := strings.Cut(l, " -> "); ok && !slices.ContainsFunc(before, func(b string) bool { return strings.HasPrefix(b, p+" -> ") }) {
							added = append(added, "/"+p)
						}
					}
					for _, l := range res.Report.FirstBoot {
						p, _, _ := strings.Cut(l, " -> ")
						reported = append(reported, p)
					}
					sort.Strings(reported)
					if !slices.Equal(added, reported) {
						t.Errorf("first-boot links: report %q, systemctl preset-all --preset-mode=enable-only adds %q", reported, added)
					}
					t.Logf("%s: a first boot adds %q, as the report says", name, added)
				}
				for _, gone := range []string{"sshd.service", "chronyd.service", "rpcbind.socket"} {
					if strings.Contains(links, "/"+gone+" ->") {
						t.Errorf("preset-all --preset-mode=%s enabled the disabled %s again:\n%s", mode, gone, links)
					}
				}
				if !strings.Contains(links, "multi-user.target.wants/zincati.service ->") {
					t.Errorf("preset-all --preset-mode=%s: zincati.service not enabled:\n%s", mode, links)
				}
			}
		})
	}
}

// TestBuildUsrOverride: a configuration file that replaces a file the base
// ships under /usr is a render warning naming both and a preflight warning
// (the usr-override check reads the build's base index); with
// --deny-usr-override the build fails before anything is written.
func TestBuildUsrOverride(t *testing.T) {
	osc := filepath.Join(t.TempDir(), "osc.yaml")
	doc := "apiVersion: extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfig\nmetadata:\n  name: worker\n  namespace: shoot--x--y\nspec:\n  type: coreos\n  purpose: reconcile\n  files:\n" +
		"  - path: /usr/lib/systemd/system/containerd.service\n    permissions: 0644\n    content:\n      inline:\n        data: \"[Service]\\nExecStart=/usr/local/bin/containerd\\n\"\n"
	if err := os.WriteFile(osc, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out := "oci:" + filepath.Join(t.TempDir(), "out")
	stdout, stderr, code := cli(t, "build", "--base", "oci:examples/base", "--pool", "worker", "--osc", osc, "--push", out, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"spec.files[0]: writes /usr/lib/systemd/system/containerd.service, which replaces the base image's file",
		"replaces the base image's file",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the result does not say %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stdout, `"usr-override"`) {
		t.Errorf("no usr-override finding in the result:\n%s", stdout)
	}
	// preflight on its own, against the base, reads the index the build
	// cached.
	stdout, stderr, code = cli(t, "preflight", out+":latest", "--base", "oci:examples/base")
	if code != 0 || !strings.Contains(stdout, "usr-override") || !strings.Contains(stdout, "usr/lib/systemd/system/containerd.service") {
		t.Errorf("preflight --base: exit %d\n%s\n%s", code, stdout, stderr)
	}
	out2 := filepath.Join(t.TempDir(), "out2")
	stdout, _, code = cli(t, "build", "--base", "oci:examples/base", "--pool", "worker", "--osc", osc, "--push", "oci:"+out2, "--deny-usr-override", "-o", "json")
	if code == 0 || !strings.Contains(stdout, "usr-override") {
		t.Errorf("--deny-usr-override: exit %d\n%s", code, stdout)
	}
	if _, err := os.Stat(filepath.Join(out2, "index.json")); err == nil {
		t.Error("--deny-usr-override: the image was written")
	}
}
