package e2e

import (
	"encoding/base64"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// registriesWith is a registries.conf of the AWS worker pool's search
// entries and quay.io/x mirrored on the given mirrors.
func registriesWith(mirrors string) string {
	conf := "unqualified-search-registries = ['registry.access.redhat.com', 'docker.io']\n" +
		"[[registry]]\nlocation = 'quay.io/x'\n[[registry.mirror]]\nlocation = 'm1.example.com/x'\n" + mirrors
	return "data:," + url.PathEscape(conf)
}

// Pool images that differ in a file's Ignition entry only (the same bytes,
// base64 instead of a plain data URL), or in a registries.conf mirror
// added with pull-from-mirror digest-only: the machine-config daemon
// compares entries whole and reboots for the first; it reloads crio
// without a drain for the second (isSafeContainerRegistryConfChanges).
func TestDiffImagesIgnitionEntry(t *testing.T) {
	const rt = "01-worker-container-runtime.yaml"
	build := func(edit func(name string, data []byte) []byte) string {
		img := "oci:" + filepath.Join(t.TempDir(), "worker")
		diffBuild(t, "oci:examples/base", "worker", img, "--machineconfig", awsWorker(t, edit))
		return img + ":latest"
	}
	conf := func(mirrors string) func(string, []byte) []byte {
		return func(name string, data []byte) []byte {
			if name == rt {
				return editFile(t, data, "/etc/containers/registries.conf", registriesWith(mirrors))
			}
			return data
		}
	}
	old := build(conf(""))
	reencoded := build(func(name string, data []byte) []byte {
		data = conf("")(name, data)
		if name == "00-worker.yaml" {
			content := "\nfs.inotify.max_user_watches = 65536\nfs.inotify.max_user_instances = 8192\n"
			return editFile(t, data, "/etc/sysctl.d/inotify.conf", "data:;base64,"+base64.StdEncoding.EncodeToString([]byte(content)))
		}
		return data
	})
	mirror := build(conf("[[registry.mirror]]\nlocation = 'm2.example.com/x'\npull-from-mirror = 'digest-only'\n"))
	for _, c := range []struct {
		new  string
		want []string
	}{
		{reencoded, []string{"changed /etc/sysctl.d/inotify.conf (ignition entry)", "openshift: reboot, drain"}},
		{mirror, []string{"changed /etc/containers/registries.conf (content)", "openshift: reload\n", "crio reloads without a drain"}},
	} {
		stdout, stderr, code := cli(t, "diff", old, c.new, "--platform", "openshift")
		for _, w := range c.want {
			if code != 0 || !strings.Contains(stdout, w) {
				t.Errorf("diff %s: exit %d, output lacks %q\n%s\n%s", c.new, code, w, stdout, stderr)
			}
		}
	}
}
