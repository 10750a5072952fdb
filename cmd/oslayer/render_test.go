package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/crane"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// runCLI runs the oslayer root command in-process.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	stdout, stderr, err := runCLIIO(t, nil, args...)
	return stdout + stderr, err
}

// runCLIIO runs the root command in-process on stdin and returns stdout
// and stderr apart.
func runCLIIO(t *testing.T, stdin []byte, args ...string) (string, string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetIn(bytes.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

// example is a path under the repository's examples/.
func example(t *testing.T, elem ...string) string {
	t.Helper()
	root, err := fixtures.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root, "examples"}, elem...)...)
}

func TestRenderCLIMachineConfigs(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	out := filepath.Join(t.TempDir(), "worker")
	text, err := runCLI(t, "render", "--machineconfig", fixtures.Path(t, "mco", "aws", "worker"), "--pool", "worker", "--output-dir", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	for _, want := range []string{"layer config", "layer metadata", "written to " + out} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
	for _, p := range []string{
		"rootfs/etc/systemd/system/kubelet.service",
		"rootfs/usr/lib/oslayer/var/var/usrlocal/bin/configure-ovs.sh",
		"rootfs/usr/lib/tmpfiles.d/oslayer-var.conf",
		"rootfs/usr/lib/oslayer/manifest.json",
		"layers/01-config.tar.gz",
		"layers/02-metadata.tar.gz",
		"report.json",
	} {
		if _, err := os.Lstat(filepath.Join(out, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(out, "rootfs/usr/local")); err == nil {
		t.Error("rootfs has a real usr/local")
	}
	var res render.Result
	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Inputs) != 3 || len(res.Layers) != 2 || res.Report == nil || len(res.Report.Baked) == 0 {
		t.Fatalf("report.json: %d inputs, %d layers", len(res.Inputs), len(res.Layers))
	}

	// -o json prints the same result; SOURCE_DATE_EPOCH reaches the layers.
	t.Setenv("SOURCE_DATE_EPOCH", "1700000001")
	out2 := filepath.Join(t.TempDir(), "worker")
	text, err = runCLI(t, "render", "--machineconfig", fixtures.Path(t, "mco", "aws", "worker"), "--pool", "worker", "--output-dir", out2, "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	var res2 render.Result
	if err := json.Unmarshal([]byte(text), &res2); err != nil {
		t.Fatalf("-o json: %v\n%s", err, text)
	}
	if res2.Layers[0].Digest == res.Layers[0].Digest || res2.InputsDigest == res.InputsDigest {
		t.Error("SOURCE_DATE_EPOCH did not change the output")
	}
}

func TestRenderCLIErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(`apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-bad
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
      - path: /usr/etc/evil
        contents:
          source: data:,x
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"render", "--machineconfig", bad}, "--output-dir DIR is required"},
		{[]string{"render", "--output-dir", "OUT"}, "nothing to render"},
		{[]string{"render", "--machineconfig", bad, "--output-dir", "OUT"}, "/usr/etc/evil"},
		{[]string{"render", "--machineconfig", bad, "--output-dir", "OUT", "--mirror", "nope"}, "want FROM=TO"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		for i, a := range c.args {
			if a == "OUT" {
				c.args[i] = filepath.Join(dir, "out")
			}
		}
		text, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want %q\n%s", c.args, err, c.want, text)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%q: output written: %v", c.args, ents)
		}
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := runCLI(t, "render", "--machineconfig", bad, "--output-dir", filepath.Join(t.TempDir(), "o")); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("bad SOURCE_DATE_EPOCH: %v", err)
	}
	// build reads it the same way, and writes nothing.
	out := filepath.Join(t.TempDir(), "layout")
	if _, err := runCLI(t, "build", "--pool", "worker", "--machineconfig", bad, "--base", "oci:"+out, "--push", "oci:"+out); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("build with a bad SOURCE_DATE_EPOCH: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("build with a bad SOURCE_DATE_EPOCH created %s", out)
	}
}

// TestRenderCLIImageRef renders the real worker OSC whose imageRef files
// point at a public registry, pulled through --mirror from a loopback
// registry seeded with images holding those files.
func TestRenderCLIImageRef(t *testing.T) {
	reg := regtest.Memory(t)
	kubelet := bytes.Repeat([]byte("kubelet-binary "), 100000) // ~1.5 MiB
	for ref, files := range map[string]map[string][]byte{
		"gardener-project/releases/hyperkube:v1.34.3":                                     {"kubelet": kubelet},
		"gardener-project/releases/gardener/node-agent:v1.150.0":                          {"gardener-node-agent": []byte("node-agent")},
		"gardener-project/releases/gardener/observability/opentelemetry-collector:v0.0.1": {"bin/otelcol": []byte("otelcol")},
	} {
		img, err := crane.Image(files)
		if err != nil {
			t.Fatal(err)
		}
		if err := crane.Push(img, reg.Host+"/"+ref); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "worker-a")
	text, err := runCLI(t, "render",
		"--osc", fixtures.Path(t, "gardener", "generated", "osc-worker-a-reconcile-full.yaml"),
		"--mirror", "europe-docker.pkg.dev="+reg.Host,
		"--output-dir", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	got, err := os.ReadFile(filepath.Join(out, "rootfs/usr/lib/oslayer/var/var/opt/bin/kubelet"))
	if err != nil || !bytes.Equal(got, kubelet) {
		t.Fatalf("kubelet from the mirror: %d bytes, %v", len(got), err)
	}
	fi, err := os.Stat(filepath.Join(out, "rootfs/usr/lib/oslayer/var/var/opt/bin/kubelet"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("kubelet mode: %v %v", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(out, "layers/01-payload.tar.gz")); err != nil {
		t.Errorf("no payload layer: %v", err)
	}
	var res render.Result
	raw, _ := os.ReadFile(filepath.Join(out, "report.json"))
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, b := range res.Report.Baked {
		if b.Path == "/opt/bin/kubelet" {
			found = b.Layer == "payload" && strings.Contains(b.FromImage, "hyperkube@sha256:")
		}
	}
	if !found {
		t.Error("report lacks /opt/bin/kubelet in the payload layer with its pinned image")
	}
}

// render --base reads the base through its index: a unit the OS ships is
// enabled as the base's [Install] says; --base-index=off assumes it.
func TestRenderCLIBase(t *testing.T) {
	t.Setenv(baseindex.CacheEnv, t.TempDir())
	base := "oci:" + filepath.Join("..", "..", "examples", "base")
	osc := filepath.Join("..", "..", "examples", "gardener", "worker-osc.yaml")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--base", base}, "base"},
		{[]string{"--base", base, "--base-index", "off"}, "fallback"},
		{nil, "fallback"},
	} {
		out := filepath.Join(t.TempDir(), "worker")
		text, err := runCLI(t, append([]string{"render", "--osc", osc, "--output-dir", out}, tc.args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", tc.args, err, text)
		}
		var res render.Result
		raw, err := os.ReadFile(filepath.Join(out, "report.json"))
		if err != nil || json.Unmarshal(raw, &res) != nil {
			t.Fatalf("report: %v", err)
		}
		got := ""
		for _, u := range res.Report.Units {
			if u.Name == "containerd.service" {
				got = u.InstallFrom
			}
		}
		if got != tc.want {
			t.Errorf("%v: containerd.service installFrom %q, want %q", tc.args, got, tc.want)
		}
	}
	if _, err := runCLI(t, "render", "--osc", osc, "--output-dir", t.TempDir(), "--base", base, "--base-index", "sometimes"); err == nil || !strings.Contains(err.Error(), "--base-index") {
		t.Errorf("bad --base-index: %v", err)
	}
}

// TestRenderCLIMachineConfigPool: --machineconfigpool selects with the
// pool's machineConfigSelector (--pool picks one of several pools), and the
// pool document is one of the report's inputs.
func TestRenderCLIMachineConfigPool(t *testing.T) {
	out := filepath.Join(t.TempDir(), "worker")
	pools := fixtures.Path(t, "mco", "pools")
	text, err := runCLI(t, "render", "--machineconfig", fixtures.Path(t, "mco", "aws"),
		"--machineconfigpool", filepath.Join(pools, "worker.machineconfigpool.yaml"),
		"--machineconfigpool", filepath.Join(pools, "master.machineconfigpool.yaml"),
		"--pool", "master", "--output-dir", out, "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	var res render.Result
	if err := json.Unmarshal([]byte(text[:strings.LastIndex(text, "}")+1]), &res); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	var kinds []string
	for _, in := range res.Inputs {
		if in.Kind == "MachineConfigPool" || strings.Contains(in.Path, "worker") {
			kinds = append(kinds, in.Kind+" "+in.Name)
		}
	}
	if strings.Join(kinds, ",") != "MachineConfigPool master" {
		t.Errorf("inputs %q: want the master pool and no worker config", kinds)
	}
	_, err = runCLI(t, "render", "--machineconfig", fixtures.Path(t, "mco", "aws"),
		"--machineconfigpool", filepath.Join(pools, "worker.machineconfigpool.yaml"),
		"--machineconfigpool", filepath.Join(pools, "master.machineconfigpool.yaml"), "--output-dir", out+"2")
	if err == nil || !strings.Contains(err.Error(), "several MachineConfigPools given (worker, master): choose one with --pool NAME") {
		t.Errorf("err = %v", err)
	}
}

// TestRenderCLIImageRefBudget: --imageref-budget bounds the imageRef content
// of one render; over it, nothing is written and the error says so.
func TestRenderCLIImageRefBudget(t *testing.T) {
	reg := regtest.Memory(t)
	kubelet := bytes.Repeat([]byte("kubelet-binary "), 100000) // ~1.5 MiB
	img, err := crane.Image(map[string][]byte{"kubelet": kubelet})
	if err != nil {
		t.Fatal(err)
	}
	if err := crane.Push(img, reg.Host+"/gardener-project/releases/hyperkube:v1.34.3"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	osc := filepath.Join(dir, "osc.yaml")
	if err := os.WriteFile(osc, []byte(synth.OSCFiles(synth.ImageRefFile("/opt/bin/kubelet", reg.Host+"/gardener-project/releases/hyperkube:v1.34.3", "/kubelet"))), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	text, err := runCLI(t, "render", "--osc", osc, "--imageref-budget", "1MiB", "--output-dir", out)
	if err == nil || !strings.Contains(err.Error(), "budget for imageRef content") || !strings.Contains(err.Error(), "/opt/bin/kubelet") {
		t.Fatalf("over the budget: %v\n%s", err, text)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output written: %v", err)
	}
	if text, err := runCLI(t, "render", "--osc", osc, "--imageref-budget", "2MiB", "--output-dir", out); err != nil {
		t.Fatalf("within the budget: %v\n%s", err, text)
	}
	for _, bad := range []string{"1GB", "-1", "x"} {
		if _, err := runCLI(t, "render", "--osc", osc, "--imageref-budget", bad, "--output-dir", out); err == nil || !strings.Contains(err.Error(), "--imageref-budget") {
			t.Errorf("--imageref-budget %s: %v", bad, err)
		}
	}
}

// TestRenderCLIStrict: an OSC with a field the OSC API no longer has (a
// file-level encoding) renders, as gardener-node-agent applies it, with a
// warning naming the file, the document and the field on stderr and in the
// JSON report; --strict refuses it and writes nothing.
func TestRenderCLIStrict(t *testing.T) {
	osc := fixtures.Path(t, "gardener", "verbatim", "os-coreos-example-40-operatingsystemconfig.yaml")
	want := osc + " (OperatingSystemConfig pool-01-original) spec.files[0].encoding: unknown field ignored"
	out := filepath.Join(t.TempDir(), "worker")
	_, stderr, err := runCLIIO(t, nil, "render", "--osc", osc, "--output-dir", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr:\n%s\nwant %q", stderr, want)
	}
	stdout, _, err := runCLIIO(t, nil, "render", "--osc", osc, "--output-dir", filepath.Join(t.TempDir(), "json"), "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var res render.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(res.Report.Warnings, "\n"), want) {
		t.Errorf("JSON warnings %q, want %q", res.Report.Warnings, want)
	}
	strictOut := filepath.Join(t.TempDir(), "strict")
	if _, err := runCLI(t, "render", "--osc", osc, "--output-dir", strictOut, "--strict"); err == nil || !strings.Contains(err.Error(), `unknown field "spec.files[0].encoding"`) {
		t.Errorf("--strict: %v", err)
	}
	if _, err := os.Stat(strictOut); !os.IsNotExist(err) {
		t.Errorf("--strict refusal wrote %s: %v", strictOut, err)
	}
}
