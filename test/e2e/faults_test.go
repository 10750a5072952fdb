package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// faultEnv is a registry holding the synthetic base, behind a fault proxy.
func faultEnv(t *testing.T) (*regtest.FaultProxy, string) {
	t.Helper()
	reg := regtest.Start(t, regtest.Config{})
	fp := regtest.NewFaultProxy(t, reg.Host)
	if _, err := synth.Push(ctxT(t), synthBase(t), reg.Host+"/fcos/base:stable"); err != nil {
		t.Fatal(err)
	}
	return fp, fp.Host + "/fcos/base:stable"
}

// TestCLIStalledRegistry: `oslayer build --timeout 2s` against a registry
// that takes the manifest PUT and never answers ends within seconds, with
// an error naming the registry, the request and the step. Before, it hung
// for ever without output.
func TestCLIStalledRegistry(t *testing.T) {
	fp, base := faultEnv(t)
	fp.SetFault(func(r *http.Request) regtest.Fault {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			return regtest.Fault{Stall: true}
		}
		return regtest.Fault{}
	})
	_, stderr, code := cli(t, "build", "--base", base, "--pool", "worker", "--osc", exampleOSC(t),
		"--push", fp.Host+"/pools/worker:latest", "--timeout", "2s")
	if code == 0 {
		t.Fatalf("build against a registry that never answers the manifest PUT succeeded\n%s", stderr)
	}
	for _, want := range []string{"put manifest", "registry " + fp.Host + " did not answer PUT /v2/pools/worker/manifests/sha256:", "within 2s (--timeout)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if lastWall > 30*time.Second {
		t.Errorf("build took %v with --timeout 2s", lastWall)
	}
	t.Logf("stalled manifest PUT: exit %d after %v, stalls %d", code, lastWall.Round(time.Millisecond), len(fp.Injected()))
}

// TestCLIRegistryRestart: the registry refuses connections for half a
// second while `oslayer build` uploads; the build retries and succeeds.
func TestCLIRegistryRestart(t *testing.T) {
	fp, base := faultEnv(t)
	var once sync.Once
	fp.SetFault(func(r *http.Request) regtest.Fault {
		f := regtest.Fault{}
		// The upload's PUT (a blob goes in a POST and one PUT).
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/blobs/uploads/") {
			once.Do(func() { f = regtest.Fault{Down: 500 * time.Millisecond} })
		}
		return f
	})
	_, stderr, code := cli(t, "build", "--base", base, "--pool", "worker", "--osc", exampleOSC(t),
		"--push", fp.Host+"/pools/worker:latest")
	if code != 0 {
		t.Fatalf("build across a 0.5s registry restart: exit %d\n%s\ninjected %v", code, stderr, fp.Injected())
	}
	if len(fp.Injected()) != 1 {
		t.Errorf("injected %v", fp.Injected())
	}
	t.Logf("0.5s registry restart during the upload: exit 0 after %v", lastWall.Round(time.Millisecond))
}

// TestCLIRenderStalledImageRef: `oslayer render` of an OSC whose imageRef
// image lives on a registry that accepts connections and never answers
// ends after --timeout with an error naming the registry and the request.
// Before, render hung for ever without output.
func TestCLIRenderStalledImageRef(t *testing.T) {
	reg := regtest.Start(t, regtest.Config{})
	fp := regtest.NewFaultProxy(t, reg.Host)
	fp.SetFault(func(*http.Request) regtest.Fault { return regtest.Fault{Stall: true} })
	osc := filepath.Join(t.TempDir(), "osc.yaml")
	if err := os.WriteFile(osc, []byte(`apiVersion: extensions.gardener.cloud/v1alpha1
kind: OperatingSystemConfig
metadata:
  name: worker
  namespace: shoot--dev--example
spec:
  type: coreos
  purpose: reconcile
  files:
  - path: /opt/bin/kubelet
    permissions: 0755
    content:
      imageRef:
        image: `+fp.Host+`/hyperkube:v1.34.3
        filePathInImage: /kubelet
`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := cli(t, "render", "--osc", osc, "--output-dir", filepath.Join(t.TempDir(), "out"), "--timeout", "2s")
	if code == 0 {
		t.Fatalf("render with an imageRef on a silent registry succeeded\n%s", stderr)
	}
	if !strings.Contains(stderr, "registry "+fp.Host+" did not answer GET /v2/") || !strings.Contains(stderr, "(--timeout)") {
		t.Errorf("stderr does not name the silent registry and the request:\n%s", stderr)
	}
	if lastWall > 60*time.Second {
		t.Errorf("render took %v with --timeout 2s", lastWall)
	}
	t.Logf("render with a silent imageRef registry: exit %d after %v", code, lastWall.Round(time.Millisecond))
}
