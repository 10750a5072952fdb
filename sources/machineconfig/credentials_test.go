package machineconfig_test

import (
	"context"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/sources/machineconfig"
	"github.com/oslayer/oslayer/sources/model"
)

// credentialMC is a MachineConfig with the pull secret, the bootstrap
// kubeconfig and one other file.
func credentialMC(secret string) []byte {
	return []byte(`apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 00-worker
  labels: {machineconfiguration.openshift.io/role: worker}
spec:
  config:
    ignition: {version: 3.5.0}
    storage:
      files:
      - {path: /var/lib/kubelet/config.json, mode: 384, contents: {source: "data:,` + secret + `"}}
      - {path: /etc/kubernetes/kubeconfig, mode: 384, contents: {source: "data:,kc"}}
      - {path: /etc/other.conf, contents: {source: "data:,x"}}
`)
}

func runtimeOf(c *model.Config) map[string]model.Runtime {
	m := map[string]model.Runtime{}
	for _, r := range c.Runtime {
		m[r.Item] = r
	}
	return m
}

// TestCredentialsRuntime: the credentials the platform writes on the node
// are runtime-delivered with their content's digest (a rotation is a
// change), unless BakeCredential asks for one; other files are baked.
func TestCredentialsRuntime(t *testing.T) {
	ctx := context.Background()
	load := func(secret string, bake func(string) bool) *model.Config {
		t.Helper()
		c, err := machineconfig.Decode(ctx, "mc.yaml", credentialMC(secret), machineconfig.Options{Pool: "worker", BakeCredential: bake})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	one, two := load("one", nil), load("two", nil)
	if len(one.Files) != 1 || one.Files[0].Path != "/etc/other.conf" {
		t.Errorf("baked %+v, want /etc/other.conf only", one.Files)
	}
	r1, r2 := runtimeOf(one), runtimeOf(two)
	for _, p := range machineconfig.CredentialPaths {
		r, ok := r1[p]
		if !ok || r.Reason != machineconfig.ReasonCredential || len(r.SHA256) != 64 || !strings.HasPrefix(r.Origin.Field, "spec.config.storage.files[") {
			t.Errorf("runtime %s: %+v", p, r)
		}
	}
	if a, b := r1["/var/lib/kubelet/config.json"].SHA256, r2["/var/lib/kubelet/config.json"].SHA256; a == b {
		t.Errorf("a rotated pull secret has the same digest %s", a)
	}
	if a, b := r1["/etc/kubernetes/kubeconfig"].SHA256, r2["/etc/kubernetes/kubeconfig"].SHA256; a != b {
		t.Errorf("the same kubeconfig has two digests %s %s", a, b)
	}
	baked := load("one", func(p string) bool { return p == "/var/lib/kubelet/config.json" })
	var paths []string
	for _, f := range baked.Files {
		paths = append(paths, f.Path)
	}
	if strings.Join(paths, " ") != "/var/lib/kubelet/config.json /etc/other.conf" || len(baked.Runtime) != 1 {
		t.Errorf("baking the pull secret: files %v, runtime %+v", paths, baked.Runtime)
	}
}
