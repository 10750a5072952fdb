package nodeside

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// bootstrapTokenPlaceholder is machine-controller-manager's
// BootstrapTokenPlaceholder (pkg/util/provider/machinecontroller), which
// gardener puts in the bootstrap token file.
const bootstrapTokenPlaceholder = "<<BOOTSTRAP_TOKEN>>"

// applyFirstBoot applies ud with the real ignition-apply to an FCOS-shaped root
// (test/synth's skeleton) and then does what systemd does on a first boot
// with Ignition's presets (systemctl preset-all, as the Ignition oracle).
func applyFirstBoot(t *testing.T, ud []byte) string {
	t.Helper()
	regtest.RequireRoot(t, "ignition-apply keeps owners and looks users up in a chroot")
	ign := regtest.Require(t, "ignition-apply")
	systemctl := regtest.Require(t, "systemctl")
	work := t.TempDir()
	root := filepath.Join(work, "root")
	synth.WriteTree(t, root, synth.Skeleton())
	cfg := filepath.Join(work, "user-data.ign")
	if err := os.WriteFile(cfg, ud, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ign, "--root", root, "--ignore-unsupported", "--offline", cfg)
	cmd.Env = append(os.Environ(), "container=oci")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ignition-apply: %v\n%s", err, out)
	}
	regtest.Run(t, nil, systemctl, "--root="+root, "preset-all")
	return root
}

// readNode reads p on the node root.
func readNode(t *testing.T, root, p string) ([]byte, os.FileMode) {
	t.Helper()
	full := filepath.Join(root, p)
	b, err := os.ReadFile(full)
	if err != nil {
		t.Errorf("%s: %v", p, err)
		return nil, 0
	}
	fi, err := os.Stat(full)
	if err != nil {
		t.Fatal(err)
	}
	return b, fi.Mode().Perm()
}

func expectFile(t *testing.T, root, p string, want []byte, mode os.FileMode) {
	t.Helper()
	got, m := readNode(t, root, p)
	if got == nil {
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s = %q, want %q", p, got, want)
	}
	if m != mode {
		t.Errorf("%s mode %04o, want %04o", p, m, mode)
	}
}

// isEnabled is `systemctl --root is-enabled` of unit.
func isEnabled(t *testing.T, root, unit string) string {
	t.Helper()
	out, _ := exec.Command("systemctl", "--root="+root, "is-enabled", unit).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// expectOSC checks that the node has osc's files (content, mode) and units
// (content, drop-ins, enablement).
func expectOSC(t *testing.T, root string, osc *extensionsv1alpha1.OperatingSystemConfig, secrets map[string]map[string][]byte) {
	t.Helper()
	for _, f := range osc.Spec.Files {
		mode := os.FileMode(0o644)
		if f.Permissions != nil {
			mode = os.FileMode(*f.Permissions)
		}
		expectFile(t, root, f.Path, fileData(t, f, secrets), mode)
	}
	for _, u := range osc.Spec.Units {
		if u.Content != nil {
			expectFile(t, root, "/etc/systemd/system/"+u.Name, []byte(*u.Content), 0o644)
		}
		for _, d := range u.DropIns {
			expectFile(t, root, "/etc/systemd/system/"+u.Name+".d/"+d.Name, []byte(d.Content), 0o644)
		}
		want := "enabled"
		switch {
		case u.Content != nil && !hasInstall(*u.Content):
			want = "static"
		case u.Content == nil:
			continue // the OS's unit: its own enablement
		case u.Enable != nil && !*u.Enable:
			want = "disabled"
		}
		if got := isEnabled(t, root, u.Name); got != want {
			t.Errorf("%s is %q, want %q", u.Name, got, want)
		}
	}
}

func TestUserDataAppliedWithPivot(t *testing.T) {
	osc := edgeOSC(gardenerProvisionOSC(t))
	policy, sigstore, pub, keyPath := trustBundle(t, NodeImages(osc)...)
	ud, err := UserData(Provision{OSC: osc, Secrets: edgeSecrets, Image: testImage, Policy: policy, SigstoreConfig: sigstore, PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	// machine-controller-manager's substitution of the URL-encoded
	// placeholders, as it does for Ignition user data.
	token := "abcdef.0123456789abcdef"
	ud = bytes.ReplaceAll(ud, []byte(url.QueryEscape(bootstrapTokenPlaceholder)), []byte(url.QueryEscape(token)))
	root := applyFirstBoot(t, ud)

	for i := range osc.Spec.Files {
		if osc.Spec.Files[i].Path == "/var/lib/gardener-node-agent/credentials/bootstrap-token" {
			osc.Spec.Files[i].Content.Inline.Data = token
		}
	}
	expectOSC(t, root, osc, edgeSecrets)

	expectFile(t, root, UpdateCommand, []byte(UpdateScript()), 0o755)
	expectFile(t, root, PoolImageFile, []byte(testImage+"\n"), 0o644)
	expectFile(t, root, PolicyPath, policy, 0o644)
	expectNodePolicy(t, root, NodeImages(osc))
	expectFile(t, root, RegistriesDFile, sigstore, 0o644)
	expectFile(t, root, keyPath, pub, 0o644)
	unit, _ := readNode(t, root, "/etc/systemd/system/"+PivotUnit)
	for _, want := range []string{
		"ExecStart=" + UpdateCommand + " --retry " + testImage + "\n",
		"Before=gardener-node-init.service gardener-node-agent.service kubelet.service\n",
		"ConditionPathExists=!" + PivotStamp + "\n",
	} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the pivot unit lacks %q:\n%s", want, unit)
		}
	}
	for _, u := range []string{PivotUnit, FirstBootUnit} {
		if got := isEnabled(t, root, u); got != "enabled" {
			t.Errorf("%s is %q, want enabled", u, got)
		}
	}
	fb, _ := readNode(t, root, "/etc/systemd/system/"+FirstBootUnit)
	if !strings.Contains(string(fb), "restart --no-block gardener-user.service\n") {
		t.Errorf("the first-boot unit does not start gardener-user.service (no [Install]) alone:\n%s", fb)
	}
	verifyUnits(t, root, PivotUnit, FirstBootUnit)
}

func TestUserDataAppliedWithoutImage(t *testing.T) {
	osc := gardenerProvisionOSC(t)
	ud, err := UserData(Provision{OSC: osc})
	if err != nil {
		t.Fatal(err)
	}
	root := applyFirstBoot(t, ud)
	for i := range osc.Spec.Files {
		if osc.Spec.Files[i].Content.TransmitUnencoded != nil {
			continue // placeholders: machine-controller-manager fills them in
		}
		f := osc.Spec.Files[i]
		expectFile(t, root, f.Path, fileData(t, f, nil), os.FileMode(*f.Permissions))
	}
	for _, p := range []string{"/etc/systemd/system/" + PivotUnit, UpdateCommand, PoolImageFile, RegistriesDFile} {
		if _, err := os.Lstat(filepath.Join(root, p)); !os.IsNotExist(err) {
			t.Errorf("%s on a node without a pool image: %v", p, err)
		}
	}
	// The base's own policy stays.
	expectFile(t, root, PolicyPath, []byte("{\"default\":[{\"type\":\"insecureAcceptAnything\"}]}\n"), 0o644)
}

// verifyUnits runs systemd-analyze verify on the extension's units in
// root, where it is installed; the units they reference are not all in
// the skeleton, so only errors about the units themselves count.
func verifyUnits(t *testing.T, root string, units ...string) {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Logf("no systemd-analyze: the units' syntax is not verified")
		return
	}
	for _, u := range units {
		out, _ := exec.Command(sa, "verify", "--root="+root, "/etc/systemd/system/"+u).CombinedOutput()
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, u) && (strings.Contains(l, "Unknown") || strings.Contains(l, "Invalid") || strings.Contains(l, "Failed to parse")) {
				t.Errorf("systemd-analyze verify %s: %s", u, l)
			}
		}
	}
}
