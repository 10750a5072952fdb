package nodeside

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/test/fixtures"
)

// TestUserDataAgainstCoreOSExtension compares the node the user data
// makes (no pool image) with the node gardener-extension-os-coreos's
// Ignition user data for the same provision OSC makes, both applied by
// ignition-apply to the skeleton and preset: every path agrees but the
// listed ones.
func TestUserDataAgainstCoreOSExtension(t *testing.T) {
	coreos, err := os.ReadFile(fixtures.Path(t, "gardener", "generated", "os-coreos-userdata-worker-a-provision.ign.raw.json"))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := UserData(Provision{OSC: gardenerProvisionOSC(t)})
	if err != nil {
		t.Fatal(err)
	}
	got := diffTrees(tree(t, applyFirstBoot(t, coreos)), tree(t, applyFirstBoot(t, ours)))
	// The os-coreos extension's own additions for Flatcar: a containerd
	// setup unit and script (under /opt, hence /var/opt), containerd's
	// exec drop-in and enablement, the masks of Flatcar's updaters
	// (update-engine, locksmithd, systemd-sysupdate) and of its docker
	// system extension. Ours: the first-boot unit that starts
	// gardener-user.service (no [Install] section) once, which os-coreos
	// marks enabled (a no-op Ignition warns about), hence the different
	// preset file.
	want := []string{
		"/etc/extensions: only os-coreos",
		"/etc/extensions/docker-flatcar.raw: only os-coreos",
		"/etc/systemd/system-preset/20-ignition.preset: differs",
		"/etc/systemd/system/containerd-setup.service: only os-coreos",
		"/etc/systemd/system/containerd.service.d: only os-coreos",
		"/etc/systemd/system/containerd.service.d/11-exec_config.conf: only os-coreos",
		"/etc/systemd/system/locksmithd.service: only os-coreos",
		"/etc/systemd/system/multi-user.target.wants/containerd-setup.service: only os-coreos",
		"/etc/systemd/system/multi-user.target.wants/containerd.service: only os-coreos",
		"/etc/systemd/system/multi-user.target.wants/oslayer-first-boot.service: only oslayer",
		"/etc/systemd/system/oslayer-first-boot.service: only oslayer",
		"/etc/systemd/system/systemd-sysupdate-reboot.timer: only os-coreos",
		"/etc/systemd/system/systemd-sysupdate.timer: only os-coreos",
		"/etc/systemd/system/update-engine.service: only os-coreos",
		"/var/opt: only os-coreos",
		"/var/opt/bin: only os-coreos",
		"/var/opt/bin/containerd-setup.sh: only os-coreos",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("differences from os-coreos's node:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// tree describes every path under root: type, mode, content digest or
// link target.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	v := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v", fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc += " " + hex.EncodeToString(sum[:8])
		}
		v[strings.TrimPrefix(p, root)] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func diffTrees(coreos, ours map[string]string) []string {
	var out []string
	for p, c := range coreos {
		o, ok := ours[p]
		switch {
		case !ok:
			out = append(out, p+": only os-coreos")
		case o != c:
			out = append(out, p+": differs")
		}
	}
	for p := range ours {
		if _, ok := coreos[p]; !ok {
			out = append(out, p+": only oslayer")
		}
	}
	// By path (a ":" sorts after the "/" of a child).
	sort.Slice(out, func(i, j int) bool {
		pi, _, _ := strings.Cut(out[i], ": ")
		pj, _, _ := strings.Cut(out[j], ": ")
		return pi < pj
	})
	return out
}
