package nodeagent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCompareTreesFindsDifferences checks the comparison itself on small
// trees: agreement through a /var relocation symlink, and one difference
// of every kind.
func TestCompareTreesFindsDifferences(t *testing.T) {
	base, nodeRoot, img := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(root, p, data string, mode os.FileMode) {
		t.Helper()
		f := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, mode); err != nil {
			t.Fatal(err)
		}
	}
	link := func(root, p, target string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []string{base, nodeRoot, img} {
		write(r, "etc/keep", "os\n", 0o644)
		link(r, "etc/systemd/system/multi-user.target.wants/sshd.service", "/usr/lib/systemd/system/sshd.service")
		write(r, "usr/lib/systemd/system/sshd.service", "[Unit]\n", 0o644)
	}
	// Same on both, the image relocating /var content (agrees).
	write(nodeRoot, "var/lib/kubelet/config", "cfg\n", 0o600)
	write(img, "usr/lib/oslayer/var/var/lib/kubelet/config", "cfg\n", 0o600)
	link(img, "var/lib/kubelet/config", "/usr/lib/oslayer/var/var/lib/kubelet/config")
	// Differences.
	write(nodeRoot, "etc/mode", "x\n", 0o600)
	write(img, "etc/mode", "x\n", 0o644)
	write(nodeRoot, "etc/content", "node\n", 0o644)
	write(img, "etc/content", "image\n", 0o644)
	write(nodeRoot, "etc/missing", "x\n", 0o644)
	write(img, "etc/extra", "x\n", 0o644)
	if err := os.Remove(filepath.Join(nodeRoot, "etc/systemd/system/multi-user.target.wants/sshd.service")); err != nil {
		t.Fatal(err)
	}
	// Left out on purpose.
	write(nodeRoot, "var/lib/gardener-node-agent/last-applied-osc.yaml", "x\n", 0o600)
	write(img, "usr/lib/tmpfiles.d/oslayer-var.conf", "L /var/lib/kubelet/config\n", 0o644)

	snap := func(r string) map[string]node {
		s, err := snapshot(r)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	got, agreed := compareTrees(snap(base), snap(nodeRoot), snap(img), nodeRoot, img, deliberate(nil))
	want := []string{
		"content /etc/content differs",
		"extra in image: /etc/extra (file 0644 " + owner(img, "etc/extra") + ")",
		"missing in image: /etc/missing (node: file 0644 " + owner(nodeRoot, "etc/missing") + ")",
		"mode /etc/mode: node 0600, image 0644",
		"removed on node, kept in image: /etc/systemd/system/multi-user.target.wants/sshd.service",
	}
	if !slices.Equal(got, want) {
		t.Errorf("differences:\n got %q\nwant %q", got, want)
	}
	// /var, /var/lib, /var/lib/kubelet and the config file agree.
	if agreed != 4 {
		t.Errorf("agreed = %d, want 4", agreed)
	}
}

func owner(root, p string) string {
	n, _ := stat(filepath.Join(root, p))
	return fmt.Sprintf("%d:%d", n.UID, n.GID)
}
