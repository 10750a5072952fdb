// Package k8senv finds the kube-apiserver and etcd binaries that
// test/setup.sh builds, for controller-runtime's envtest (the directory
// KUBEBUILDER_ASSETS names).
package k8senv

import (
	"os"
	"path/filepath"
	"testing"
)

// KubeVersion is the kube-apiserver version setup.sh builds (matching the
// client-go version of go.mod).
const KubeVersion = "v1.37.2"

// Assets returns the directory holding kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS, else $OSLAYER_TOOLS/kube/VERSION (default
// ~/.cache/oslayer-tools). It skips the test when they are missing, and
// fails it with OSLAYER_REQUIRE_KUBE=1 (test/run.sh sets it: test/setup.sh
// builds them unless OSLAYER_KUBE=0). In -short runs (test/unit.sh) it
// skips the test: an API server takes seconds to start.
func Assets(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("envtest (kube-apiserver and etcd): not in -short runs")
	}
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		tools := os.Getenv("OSLAYER_TOOLS")
		if tools == "" {
			home, _ := os.UserHomeDir()
			tools = filepath.Join(home, ".cache", "oslayer-tools")
		}
		dir = filepath.Join(tools, "kube", KubeVersion)
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if fi, err := os.Stat(filepath.Join(dir, bin)); err != nil || fi.Mode()&0o111 == 0 {
			if os.Getenv("OSLAYER_REQUIRE_KUBE") == "1" {
				t.Fatalf("%s is required (OSLAYER_REQUIRE_KUBE=1) but not in %s (test/setup.sh builds it)", bin, dir)
			}
			t.Skipf("%s not in %s (test/setup.sh builds it)", bin, dir)
		}
	}
	return dir
}
