package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/diff"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// pullSecret is the AWS worker pool's pull secret path as oslayer stores
// it; the diff builds bake it on purpose (--allow-secret; by default the
// platform delivers it and it is not in the image).
const pullSecret = "/usr/lib/oslayer/var/var/lib/kubelet/config.json"

// awsWorkerEdited copies the real AWS worker MachineConfigs, replacing
// the content of the file path in document doc.
func awsWorkerEdited(t *testing.T, doc, path, dataURL string) string {
	t.Helper()
	return awsWorker(t, func(name string, data []byte) []byte {
		if name == doc {
			return editFile(t, data, path, dataURL)
		}
		return data
	})
}

// awsWorker copies the real AWS worker MachineConfigs into a new folder,
// each document through edit.
func awsWorker(t *testing.T, edit func(name string, data []byte) []byte) string {
	t.Helper()
	dir := t.TempDir()
	src := fixtures.Path(t, "mco", "aws", "worker")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), edit(e.Name(), data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// editFile replaces one Ignition file's source in a MachineConfig.
func editFile(t *testing.T, data []byte, path, dataURL string) []byte {
	t.Helper()
	var mc map[string]any
	if err := yaml.Unmarshal(data, &mc); err != nil {
		t.Fatal(err)
	}
	files := mc["spec"].(map[string]any)["config"].(map[string]any)["storage"].(map[string]any)["files"].([]any)
	found := false
	for _, f := range files {
		if fm := f.(map[string]any); fm["path"] == path {
			fm["contents"], found = map[string]any{"source": dataURL}, true
		}
	}
	if !found {
		t.Fatalf("no file %s", path)
	}
	out, err := yaml.Marshal(mc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diffBuild builds a pool image of MachineConfigs and returns the
// digested reference build prints.
func diffBuild(t *testing.T, base, pool, target string, inputs ...string) string {
	t.Helper()
	args := append([]string{"build", "--base", base, "--pool", pool, "--allow-secret", pullSecret, "--push", target}, inputs...)
	stdout, stderr, code := cli(t, args...)
	if code != 0 {
		t.Fatalf("build: exit %d\n%s", code, stderr)
	}
	return lastLine(stdout)
}

// Two builds of the real AWS worker pool, policy.json changed, pushed to
// a registry: diff names the path and its sources on both sides, predicts
// the daemon's crio reload, a reboot through osImageURL and a bootc soft
// reboot, counts the download, gates with --fail-on, and reads no base
// blob.
func TestDiffImages(t *testing.T) {
	regtest.Require(t, "docker-registry")
	e := newEnv(t)
	repo := e.proxy.Host + "/pools/worker"
	old := diffBuild(t, e.base, "worker", repo, "--machineconfig", fixtures.Path(t, "mco", "aws", "worker"))
	newDir := awsWorkerEdited(t, "01-worker-container-runtime.yaml", "/etc/containers/policy.json", "data:,%7B%7D")
	newRef := diffBuild(t, e.base, "worker", repo, "--machineconfig", newDir)
	baseBlobs := baseLayerDigests(t)

	e.proxy.Reset()
	stdout, stderr, code := cli(t, "diff", old, repo+":latest", "-o", "json")
	if code != 0 {
		t.Fatalf("diff: exit %d\n%s", code, stderr)
	}
	var r diff.Result
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	for _, req := range e.proxy.Requests() {
		if i := strings.Index(req.Path, "/blobs/"); i >= 0 && baseBlobs[req.Path[i+len("/blobs/"):]] {
			t.Errorf("diff read a base layer: %s %s", req.Method, req.Path)
		}
	}
	checkPolicyJSONDiff(t, &r, newRef)

	for _, c := range []struct {
		args []string
		code int
		self bool // OLD against itself
	}{
		{[]string{"--fail-on", "reboot"}, 1, false},                            // a new osImageURL reboots
		{[]string{"--platform", "openshift", "--fail-on", "reload"}, 1, false}, // the daemon reloads crio
		{[]string{"--platform", "openshift", "--fail-on", "restart"}, 0, false},
		{[]string{"--platform", "bootc", "--fail-on", "reboot"}, 0, false}, // soft reboot
		{[]string{"--fail-on", "none"}, 1, true},                           // identical: none is none
		{[]string{"--fail-on", "reload"}, 0, true},
	} {
		args := append([]string{"diff", old, newRef}, c.args...)
		if c.self {
			args = append([]string{"diff", old, old}, c.args...)
		}
		if _, stderr, code := cli(t, args...); code != c.code {
			t.Errorf("diff %v: exit %d, want %d\n%s", c.args, code, c.code, stderr)
		}
	}
	stdout, _, _ = cli(t, "diff", old, newRef)
	for _, want := range []string{"changed /etc/containers/policy.json (content)", "(MachineConfig 01-worker-container-runtime) spec.config.storage.files[3]", "openshift: reload", "bootc: soft-reboot"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text output lacks %q:\n%s", want, stdout)
		}
	}
}

// checkPolicyJSONDiff checks the JSON result of the policy.json change.
func checkPolicyJSONDiff(t *testing.T, r *diff.Result, newRef string) {
	t.Helper()
	if len(r.Paths) != 1 || r.Paths[0].Path != "/etc/containers/policy.json" || r.Paths[0].Change != "changed" {
		t.Fatalf("paths %+v, want policy.json changed", r.Paths)
	}
	p := r.Paths[0]
	for _, it := range []string{p.Old.Source.Field, p.New.Source.Field} {
		if it != "spec.config.storage.files[3]" {
			t.Errorf("source field %q", it)
		}
	}
	if !strings.HasSuffix(newRef, "@"+r.New.Digest) {
		t.Errorf("NEW digest %s, build printed %s", r.New.Digest, newRef)
	}
	want := map[string]diff.Action{diff.PlatformOpenShift: diff.Reload, diff.PlatformOpenShiftImage: diff.Reboot, diff.PlatformBootc: diff.SoftReboot}
	for name, a := range want {
		if got := r.Platform(name); got == nil || got.Action != a {
			t.Errorf("%s: %+v, want %s", name, got, a)
		}
	}
	if os := r.Platform(diff.PlatformOpenShift); len(os.MCOActions) != 1 || os.MCOActions[0] != "Reload crio.service" {
		t.Errorf("daemon actions %v", os.MCOActions)
	}
	// The config and metadata layers changed; the payload layer and the
	// base did not.
	if r.Download.Layers != 2 || r.Download.Bytes <= 0 || r.Download.OldLayers != r.Download.NewLayers {
		t.Errorf("download %+v: want 2 layers of the same count", r.Download)
	}
	var sum int64
	for _, l := range r.Download.Missing {
		if l.Role == "base" {
			t.Errorf("a base layer to download: %+v", l)
		}
		sum += l.Size
	}
	if sum != r.Download.Bytes {
		t.Errorf("download bytes %d, the missing layers sum to %d", r.Download.Bytes, sum)
	}
}

// baseLayerDigests are the synthetic base's layer digests.
func baseLayerDigests(t *testing.T) map[string]bool {
	t.Helper()
	m, err := synthBase(t).Manifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range m.Layers {
		out[l.Digest.String()] = true
	}
	return out
}

// relabel copies the AWS worker MachineConfigs with another role.
func relabel(t *testing.T, role string) string {
	t.Helper()
	return awsWorker(t, func(_ string, data []byte) []byte {
		return []byte(strings.ReplaceAll(string(data), "machineconfiguration.openshift.io/role: worker", "machineconfiguration.openshift.io/role: "+role))
	})
}

// Bad input exits 2 naming the input, with nothing on stdout: a reference
// that does not resolve, images of different pools, a policy file that is
// not a MachineConfiguration, an unknown --fail-on, images of different
// architectures.
func TestDiffBadInput(t *testing.T) {
	regtest.Require(t, "docker-registry")
	e := newEnv(t)
	worker := diffBuild(t, e.base, "worker", e.proxy.Host+"/pools/worker", "--machineconfig", fixtures.Path(t, "mco", "aws", "worker"))
	other := diffBuild(t, e.base, "other", e.proxy.Host+"/pools/other", "--machineconfig", relabel(t, "other"))
	armBase, err := synth.ArchBase("arm64", defaultScale)
	if err != nil {
		t.Fatal(err)
	}
	armDigest, err := synth.Push(ctxT(t), armBase, e.reg.Host+"/fcos/base-arm64:stable")
	if err != nil {
		t.Fatal(err)
	}
	arm := diffBuild(t, armDigest.String(), "worker", e.proxy.Host+"/pools/worker-arm64", "--arch", "arm64", "--machineconfig", fixtures.Path(t, "mco", "aws", "worker"))
	mc := fixtures.Path(t, "mco", "aws", "worker", "00-worker.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{worker, e.proxy.Host + "/pools/nothing:latest"}, e.proxy.Host + "/pools/nothing:latest"},
		{[]string{worker, other}, `is pool "other"`},
		{[]string{worker, arm}, "is arm64"},
		{[]string{worker, worker, "--node-disruption-policy", mc}, mc},
		{[]string{worker, worker, "--fail-on", "explode"}, `"explode"`},
		{[]string{worker}, "--new-machineconfig"},
	} {
		stdout, stderr, code := cli(t, append([]string{"diff"}, c.args...)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("diff %v: exit %d, stdout %q, stderr %q; want exit 2 naming %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// sshMC is a MachineConfig of the worker role with one SSH key for core.
func sshMC(t *testing.T, key string) string {
	t.Helper()
	doc := `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-worker-ssh
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.5.0
    passwd:
      users:
      - name: core
        sshAuthorizedKeys:
        - ` + key + "\n"
	p := filepath.Join(t.TempDir(), "99-worker-ssh.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Two input sets (an SSH key change on the real AWS worker pool): the
// default policy does nothing for SSH keys, a cluster's MachineConfiguration
// that drains for them makes --fail-on drain exit 1. An image against new
// inputs shows the path that changed.
func TestDiffInputSets(t *testing.T) {
	pool := fixtures.Path(t, "mco", "aws", "worker")
	policy := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
spec:
  managementState: Managed
  nodeDisruptionPolicy:
    sshkey:
      actions:
      - type: Drain
`), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"diff", "--pool", "worker", "--machineconfig", pool,
		"--old-machineconfig", sshMC(t, "ssh-ed25519 AAAA old"), "--new-machineconfig", sshMC(t, "ssh-ed25519 AAAA new"),
		"--platform", "openshift", "--fail-on", "drain", "-o", "json"}
	if _, stderr, code := cli(t, args...); code != 0 {
		t.Errorf("default policy: exit %d, want 0 (SSH keys: None)\n%s", code, stderr)
	}
	stdout, stderr, code := cli(t, append(args, "--node-disruption-policy", policy)...)
	if code != 1 {
		t.Fatalf("cluster policy: exit %d, want 1 (--fail-on drain)\n%s", code, stderr)
	}
	var r diff.Result
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	os := r.Platform(diff.PlatformOpenShift)
	if os.Action != diff.Drain || len(os.Rules) != 1 || os.Rules[0].Item != "sshKeys" || !r.MCO.Passwd {
		t.Errorf("openshift %+v, MCO change %+v: want a drain for the SSH keys", os, r.MCO)
	}

	img := "oci:" + filepath.Join(t.TempDir(), "worker")
	diffBuild(t, "oci:examples/base", "worker", img, "--machineconfig", pool)
	edited := awsWorkerEdited(t, "01-worker-container-runtime.yaml", "/etc/containers/registries.conf", "data:,%23%20none%0A")
	stdout, stderr, code = cli(t, "diff", img+":latest", "--pool", "worker", "--new-machineconfig", edited)
	if code != 0 || !strings.Contains(stdout, "changed /etc/containers/registries.conf (content)") || !strings.Contains(stdout, "openshift: drain") {
		t.Errorf("image against inputs: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
