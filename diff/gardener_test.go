package diff

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/test/fixtures"
)

// editedOSC writes a copy of the example worker OSC with each old string
// replaced by its new one.
func editedOSC(t *testing.T, repl ...string) string {
	t.Helper()
	root, err := fixtures.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", "gardener", "worker-osc.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for i := 0; i+1 < len(repl); i += 2 {
		if !strings.Contains(s, repl[i]) {
			t.Fatalf("the example OSC has no %q", repl[i])
		}
		s = strings.ReplaceAll(s, repl[i], repl[i+1])
	}
	p := filepath.Join(t.TempDir(), "osc.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func oscSide(t *testing.T, path string) *Side {
	t.Helper()
	s, err := LoadInputs(context.Background(), path, render.Request{OSCs: []string{path}, Pool: "worker"}, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A sysctl file and a containerd drop-in change: the node agent rewrites
// the file, restarts systemd-sysctl (its filePaths name the file) and
// containerd (its drop-in changed), and reboots nothing; bootc can
// soft-reboot; the MachineConfig platforms do not apply.
func TestGardenerRuntimeApply(t *testing.T) {
	old := oscSide(t, editedOSC(t))
	new := oscSide(t, editedOSC(t, "fs.inotify.max_user_watches = 524288", "fs.inotify.max_user_watches = 1048576",
		"LimitNOFILE=1048576", "LimitNOFILE=65536"))
	r, err := Compare(old, new, Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := r.Platform(PlatformGardener)
	if !g.Applies || g.Action != Restart || g.Drain {
		t.Errorf("gardener %+v: want restart without drain", g)
	}
	if !slices.Equal(g.Restarted, []string{"containerd.service", "systemd-sysctl.service"}) {
		t.Errorf("restarted %v", g.Restarted)
	}
	if !slices.Equal(g.Rewritten, []string{"/etc/sysctl.d/99-k8s-general.conf"}) {
		t.Errorf("rewritten %v", g.Rewritten)
	}
	if b := r.Platform(PlatformBootc); b.Action != SoftReboot {
		t.Errorf("bootc %s, want soft-reboot", b.Action)
	}
	if os := r.Platform(PlatformOpenShift); os.Applies {
		t.Error("openshift applies to OSC inputs")
	}
	if r.Action != SoftReboot {
		t.Errorf("overall %s, want soft-reboot (bootc)", r.Action)
	}
}

// A file under /etc/selinux changes the SELinux policy: bootc reboots.
func TestBootcSELinuxReboots(t *testing.T) {
	add := `  files:
  - path: /etc/selinux/targeted/contexts/files/file_contexts.local
    permissions: 420
    content:
      inline:
        data: |
          /opt/bin(/.*)? system_u:object_r:bin_t:s0
`
	old := oscSide(t, editedOSC(t))
	new := oscSide(t, editedOSC(t, "  files:\n", add))
	r, err := Compare(old, new, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := r.Platform(PlatformBootc)
	if b.Action != Reboot || len(b.Rules) == 0 || !strings.HasPrefix(b.Rules[0].Item, "/etc/selinux/") {
		t.Errorf("bootc %+v, want a reboot for the SELinux policy", b)
	}
	if g := r.Platform(PlatformGardener); g.Action != None || len(g.Rewritten) != 1 {
		t.Errorf("gardener %+v, want the file rewritten, nothing restarted", g)
	}
}
