package nodeagent

import (
	"archive/tar"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/oslayer/oslayer/test/synth"
)

// baseTag is the tag of the oracle base in its OCI layout.
const baseTag = "oracle"

// osUnits are units that the operating systems Gardener's OS extensions
// target ship and that the cases only add drop-ins to, enable, disable or
// stop (Flatcar's update-engine and locksmithd, docker on Ubuntu and SUSE,
// timesyncd, ...). The example base does not carry them, and a real
// node agent fails on a unit the OS does not have, so the oracle base adds
// them: the same base for the node agent and for oslayer.
var osUnits = map[string]string{
	"docker.service":            "[Unit]\nDescription=Docker Application Container Engine\n\n[Service]\nExecStart=/usr/bin/dockerd\n\n[Install]\nWantedBy=multi-user.target\n",
	"update-engine.service":     "[Unit]\nDescription=Update Engine\n\n[Service]\nExecStart=/usr/sbin/update_engine -foreground\n\n[Install]\nWantedBy=multi-user.target\n",
	"locksmithd.service":        "[Unit]\nDescription=Cluster reboot manager\n\n[Service]\nExecStart=/usr/lib/locksmith/locksmithd\n\n[Install]\nWantedBy=multi-user.target\n",
	"ntpd.service":              "[Unit]\nDescription=Network Time Service\n\n[Service]\nExecStart=/usr/sbin/ntpd -g -n\n\n[Install]\nWantedBy=multi-user.target\n",
	"systemd-timesyncd.service": "[Unit]\nDescription=Network Time Synchronization\n\n[Service]\nExecStart=/usr/lib/systemd/systemd-timesyncd\n\n[Install]\nWantedBy=sysinit.target\n",
	"existing-unit.service":     "[Unit]\nDescription=a unit the OS ships\n\n[Service]\nExecStart=/usr/bin/true\n",
	"some-unit.service":         "[Unit]\nDescription=a unit the OS ships\n\n[Service]\nExecStart=/usr/bin/true\n\n[Install]\nWantedBy=multi-user.target\n",
	"some-other-unit.service":   "[Unit]\nDescription=a unit the OS ships\n\n[Service]\nExecStart=/usr/bin/true\n\n[Install]\nWantedBy=multi-user.target\n",
	"basic.target":              "[Unit]\nDescription=Basic System\nRequires=sysinit.target\nWants=sockets.target timers.target paths.target slices.target\nAfter=sysinit.target\n",
	"sockets.target":            "[Unit]\nDescription=Sockets\n",
	"paths.target":              "[Unit]\nDescription=Path Units\n",
	"slices.target":             "[Unit]\nDescription=Slice Units\n",
	"sysinit.target":            "[Unit]\nDescription=System Initialization\n",
	"timers.target":             "[Unit]\nDescription=Timer Units\n",
}

// osEnabled are the enablement links the OS ships in /etc, as presets leave
// them on Fedora CoreOS and Flatcar: the services a node runs before any
// OSC (sshd, chronyd, the Flatcar updaters).
var osEnabled = map[string]string{
	"multi-user.target.wants/sshd.service":          "/usr/lib/systemd/system/sshd.service",
	"multi-user.target.wants/chronyd.service":       "/usr/lib/systemd/system/chronyd.service",
	"multi-user.target.wants/update-engine.service": "/usr/lib/systemd/system/update-engine.service",
	"multi-user.target.wants/locksmithd.service":    "/usr/lib/systemd/system/locksmithd.service",
}

// osPresets are the OS's preset files, as on Fedora CoreOS: the units it
// enables, and everything else disabled.
var osPresets = map[string]string{
	"90-default.preset":         "enable sshd.service\nenable chronyd.service\nenable update-engine.service\nenable locksmithd.service\n",
	"99-default-disable.preset": "disable *\n",
}

// oracleBase writes the oracle base: the repository's example base (an
// ostree-shaped FCOS image) plus one layer with osUnits and osEnabled. It
// returns the layout directory.
func oracleBase(t *testing.T, repo string) string {
	t.Helper()
	p, err := layout.FromPath(filepath.Join(repo, "examples", "base"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	img, err := p.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Date(2025, 9, 1, 0, 0, 0, 0, time.UTC)
	hdr := func(h *tar.Header) {
		h.ModTime, h.Format = epoch, tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"etc/", "etc/systemd/", "etc/systemd/system/", "etc/systemd/system/multi-user.target.wants/",
		"usr/", "usr/lib/", "usr/lib/systemd/", "usr/lib/systemd/system/"} {
		hdr(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755})
	}
	for _, n := range sortedKeys(osUnits) {
		hdr(&tar.Header{Name: "usr/lib/systemd/system/" + n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(osUnits[n]))})
		if _, err := tw.Write([]byte(osUnits[n])); err != nil {
			t.Fatal(err)
		}
	}
	hdr(&tar.Header{Name: "usr/lib/systemd/system/default.target", Typeflag: tar.TypeSymlink, Linkname: "multi-user.target", Mode: 0o777})
	hdr(&tar.Header{Name: "usr/lib/systemd/system-preset/", Typeflag: tar.TypeDir, Mode: 0o755})
	for _, n := range sortedKeys(osPresets) {
		hdr(&tar.Header{Name: "usr/lib/systemd/system-preset/" + n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(osPresets[n]))})
		if _, err := tw.Write([]byte(osPresets[n])); err != nil {
			t.Fatal(err)
		}
	}
	// systemd pulls systemd-sysctl.service in statically, as systemd's own
	// package does.
	hdr(&tar.Header{Name: "usr/lib/systemd/system/sysinit.target.wants/", Typeflag: tar.TypeDir, Mode: 0o755})
	hdr(&tar.Header{Name: "usr/lib/systemd/system/sysinit.target.wants/systemd-sysctl.service", Typeflag: tar.TypeSymlink, Linkname: "../systemd-sysctl.service", Mode: 0o777})
	for _, n := range sortedKeys(osEnabled) {
		hdr(&tar.Header{Name: "etc/systemd/system/" + n, Typeflag: tar.TypeSymlink, Linkname: osEnabled[n], Mode: 0o777})
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: synth.TarLayer(t, buf.Bytes()),
		History: v1History("oracle: units of the operating systems Gardener targets")})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "base")
	lp, err := layout.Write(dir, emptyIndex())
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": baseTag})); err != nil {
		t.Fatal(err)
	}
	return dir
}

// unpack unpacks the image tagged tag of an OCI layout with umoci and
// boots it for the first time (firstBoot).
// It returns the root file system.
func unpack(t *testing.T, layoutDir, tag string) string {
	t.Helper()
	bundle := filepath.Join(t.TempDir(), "bundle")
	args := []string{"unpack"}
	if os.Geteuid() != 0 {
		args = append(args, "--rootless")
	}
	run(t, "umoci", append(args, "--image", layoutDir+":"+tag, bundle)...)
	rootfs := filepath.Join(bundle, "rootfs")
	firstBoot(t, rootfs)
	return rootfs
}

// firstBoot does to root what the first boot of a node does to its file
// system: systemd applies the presets (preset-all in enable-only mode, as
// the system manager does when the machine ID is new), and
// systemd-tmpfiles creates what every tmpfiles.d rule says. A node whose
// /etc was installed from the image before boots the same way, minus the
// presets.
func firstBoot(t *testing.T, root string) {
	t.Helper()
	run(t, "systemctl", "--root="+root, "preset-all", "--preset-mode=enable-only")
	// Exit code 65 (EX_DATAERR) only reports rules for users the tree
	// does not know; the rules that can apply are applied.
	out, err := exec.Command("systemd-tmpfiles", "--root="+root, "--create", "--boot").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); err != nil && !(ok && ee.ExitCode() == 65) {
		t.Fatalf("systemd-tmpfiles --root=%s --create: %v\n%s", root, err, out)
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func v1History(createdBy string) v1.History {
	return v1.History{CreatedBy: createdBy, Created: v1.Time{Time: time.Date(2025, 9, 1, 0, 0, 0, 0, time.UTC)}}
}

func emptyIndex() v1.ImageIndex { return empty.Index }
