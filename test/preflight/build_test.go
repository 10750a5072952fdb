package preflight_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/sources/machineconfig"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

const keyOSC = `apiVersion: extensions.gardener.cloud/v1alpha1
kind: OperatingSystemConfig
metadata:
  name: osc-worker
  namespace: shoot--dev--example
spec:
  type: coreos
  purpose: reconcile
  files:
  - path: /etc/ssl/private/node.key
    permissions: 384
    content:
      inline:
        data: "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBogus\n-----END EC PRIVATE KEY-----\n"
  units:
  - name: hello.service
    content: |
      [Unit]
      Description=hello
      [Service]
      ExecStart=/usr/bin/true
      [Install]
      WantedBy=multi-user.target
`

// TestBuildStage: inside `oslayer build`, a preflight error fails the build
// and the tag does not move; once allowed, the build tags the image and its
// JSON result carries the preflight report.
func TestBuildStage(t *testing.T) {
	reg := regtest.Start(t, regtest.Config{})
	base, err := synth.FCOSBase(0.001)
	if err != nil {
		t.Fatal(err)
	}
	baseRef := push(t, base, reg.Host+"/fcos/coreos:stable")
	osc := filepath.Join(t.TempDir(), "osc.yaml")
	if err := os.WriteFile(osc, []byte(keyOSC), 0o644); err != nil {
		t.Fatal(err)
	}
	target := reg.Host + "/pool/worker:latest"
	args := []string{"build", "--base", baseRef, "--pool", "worker", "--osc", osc, "--push", target, "-o", "json"}

	_, stderr, code := cli(t, args...)
	if code != 2 || !strings.Contains(stderr, "preflight: 1 error(s) in ") || !strings.Contains(stderr, "secrets /etc/ssl/private/node.key") {
		t.Fatalf("build with a private key: exit %d\n%s", code, stderr)
	}
	tag, err := name.ParseReference(target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(tag); err == nil {
		t.Fatalf("tag %s exists after a failed preflight", target)
	}

	out, stderr, code := cli(t, append(args, "--allow-secret", "/etc/ssl/private/node.key")...)
	if code != 0 {
		t.Fatalf("build with --allow-secret: exit %d\n%s", code, stderr)
	}
	var res struct {
		Tagged bool `json:"tagged"`
		Stages struct {
			Preflight preflight.Report `json:"preflight"`
		} `json:"stages"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("build result: %v\n%s", err, out)
	}
	rep := res.Stages.Preflight
	if !res.Tagged || rep.Result != "passed" || rep.Errors != 0 || rep.Infos != 1 || len(rep.Findings) != 1 ||
		rep.Findings[0].Message != "holds a PEM private key, allowed by preflight.allowSecrets /etc/ssl/private/node.key" || rep.Findings[0].Field != "preflight.allowSecrets" {
		t.Errorf("result tagged=%v preflight %+v\n%s", res.Tagged, rep, out)
	}
	if _, err := remote.Head(tag); err != nil {
		t.Errorf("tag %s after a passing build: %v", target, err)
	}
}

// TestContentCheckWritesNothing: a build stopped by a content check (here
// the secret check) sends no blob to the registry, neither uploaded nor
// mounted, and puts no manifest; into an OCI layout it writes no blob.
// Before, the layer holding the key was in the registry when the check
// failed, and the error printed the digest that fetches it.
func TestContentCheckWritesNothing(t *testing.T) {
	reg := regtest.Start(t, regtest.Config{})
	proxy := regtest.NewProxy(t, reg.Host)
	base, err := synth.FCOSBase(0.001)
	if err != nil {
		t.Fatal(err)
	}
	baseRef := push(t, base, proxy.Host+"/fcos/coreos:stable")
	osc := filepath.Join(t.TempDir(), "osc.yaml")
	if err := os.WriteFile(osc, []byte(keyOSC), 0o644); err != nil {
		t.Fatal(err)
	}
	proxy.Reset()
	_, stderr, code := cli(t, "build", "--base", baseRef, "--pool", "worker", "--osc", osc, "--push", proxy.Host+"/pool/worker:latest")
	if code != 2 || !strings.Contains(stderr, "preflight: 1 error(s) in ") || !strings.Contains(stderr, "secrets /etc/ssl/private/node.key") {
		t.Fatalf("build with a private key: exit %d\n%s", code, stderr)
	}
	for _, r := range proxy.Requests() {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			t.Errorf("a build stopped by a content check sent %s %s?%s\nall requests:\n%s", r.Method, r.Path, r.Query, proxy.Dump())
		}
	}
	if strings.Contains(stderr, "pool/worker@sha256:") {
		t.Errorf("the error names a digest in the target:\n%s", stderr)
	}

	// The OpenShift worker set: its pull secret /var/lib/kubelet/config.json
	// is the platform's to deliver: reported as runtime-delivered, not
	// baked, and the build goes through without --allow-secret.
	proxy.Reset()
	var out string
	out, stderr, code = cli(t, "build", "--base", baseRef, "--pool", "worker", "--machineconfig", fixtures.Path(t, "mco", "aws", "worker"),
		"--push", proxy.Host+"/os/aws:latest", "-o", "json")
	if code != 0 || !strings.Contains(out, `"item": "/var/lib/kubelet/config.json",`) || !strings.Contains(out, `"reason": "`+machineconfig.ReasonCredential+`",`) {
		t.Fatalf("build of the OpenShift worker set: exit %d\n%s\n%s", code, out, stderr)
	}
	// Baked on purpose (--bake-secrets), the secrets check stops it: it
	// never reaches the registry.
	proxy.Reset()
	_, stderr, code = cli(t, "build", "--base", baseRef, "--pool", "worker", "--machineconfig", fixtures.Path(t, "mco", "aws", "worker"),
		"--bake-secrets", "--push", proxy.Host+"/os/aws:latest")
	if code != 2 || !strings.Contains(stderr, "secrets /") || !strings.Contains(stderr, "kubelet/config.json (layer") {
		t.Fatalf("build of the OpenShift worker set with --bake-secrets: exit %d\n%s", code, stderr)
	}
	for _, r := range proxy.Requests() {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			t.Errorf("the OpenShift build stopped by the secrets check sent %s %s?%s", r.Method, r.Path, r.Query)
		}
	}

	dir := filepath.Join(t.TempDir(), "layout")
	_, stderr, code = cli(t, "build", "--base", baseRef, "--pool", "worker", "--osc", osc, "--push", "oci:"+dir+":latest")
	if code != 2 || !strings.Contains(stderr, "secrets /etc/ssl/private/node.key") {
		t.Fatalf("build into a layout with a private key: exit %d\n%s", code, stderr)
	}
	var blobs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, string(filepath.Separator)+"blobs"+string(filepath.Separator)) {
			blobs = append(blobs, p)
		}
		return nil
	})
	if len(blobs) > 0 {
		t.Errorf("a build stopped by a content check wrote %d blob(s) into the layout, e.g. %s", len(blobs), blobs[0])
	}
}
