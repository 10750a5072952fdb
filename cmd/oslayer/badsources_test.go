package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/test/regtest"
)

// badSources writes the input files the bad-source cases give: each is
// the user's input at fault, named by its path.
func badSources(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{
		"bad-yaml.yaml":   "apiVersion: [\n",
		"wrong-kind.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n",
		"bad-field.yaml":  oscWithFile("    permissions: 99999\n    content: {inline: {data: x}}\n"),
		"bad-mc.yaml": "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\n" +
			"metadata: {name: 99-worker-bad, labels: {machineconfiguration.openshift.io/role: worker}}\n" +
			"spec: {kernelArguments: nosmt}\n",
	}
	paths := map[string]string{}
	for name, data := range files {
		paths[name] = filepath.Join(dir, name)
		if err := os.WriteFile(paths[name], []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

// oscWithFile is a worker-pool OSC with one file /etc/oslayer-test whose
// other fields are file.
func oscWithFile(file string) string {
	return "apiVersion: extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfig\n" +
		"metadata: {name: bad, namespace: shoot--x, labels: {worker.gardener.cloud/pool: worker}}\n" +
		"spec:\n  type: coreos\n  purpose: reconcile\n  files:\n  - path: /etc/oslayer-test\n" + file
}

// sourceCases are input files oslayer build and render refuse as bad
// input (exit 2), each with what the error names: the file, the document,
// the field.
func sourceCases(t *testing.T, dir string) []struct {
	name string
	args []string
	want []string
} {
	p := badSources(t, dir)
	missing := filepath.Join(dir, "none.yaml")
	return []struct {
		name string
		args []string
		want []string
	}{
		{"OSC that does not parse", []string{"--osc", p["bad-yaml.yaml"]}, []string{p["bad-yaml.yaml"]}},
		{"document of the wrong kind", []string{"--osc", p["wrong-kind.yaml"]}, []string{p["wrong-kind.yaml"], `kind "ConfigMap"`}},
		{"OSC file that does not exist", []string{"--osc", missing}, []string{missing}},
		{"OSC field value refused", []string{"--osc", p["bad-field.yaml"]}, []string{p["bad-field.yaml"], "OperatingSystemConfig bad", "permissions 99999"}},
		{"MachineConfig of a wrong type", []string{"--machineconfig", p["bad-mc.yaml"]}, []string{p["bad-mc.yaml"], "spec.kernelArguments"}},
		{"MachineConfig file that does not exist", []string{"--machineconfig", missing}, []string{missing}},
	}
}

// Input files oslayer build reads that are bad (not parsing, of the wrong
// kind, missing, a field value refused) exit 2 naming the file, document
// and field, and nothing is written.
func TestBuildBadSourcesExit2(t *testing.T) {
	t.Setenv("OSLAYER_BASEINDEX_CACHE", t.TempDir())
	dir := t.TempDir()
	px := regtest.NewProxy(t, regtest.Memory(t).Host)
	layout, repo := filepath.Join(dir, "layout"), px.Host+"/os/worker:latest"
	for _, tc := range sourceCases(t, dir) {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"build", "--base", "oci:" + example(t, "base"), "--pool", "worker"}, tc.args...)
			if tc.args[0] == "--machineconfig" {
				args = append(args, "--osc", example(t, "gardener", "worker-osc.yaml"))
			}
			code, stdout, stderr := oslayerRun(t, append(args, "--push", repo)...)
			checkBadInput(t, px, layout, code, stdout, stderr, tc.want)
		})
	}
}

// oslayer render exits 2 for the same input files, and leaves its output
// directory unwritten.
func TestRenderBadSourcesExit2(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	px := regtest.NewProxy(t, regtest.Memory(t).Host)
	for _, tc := range sourceCases(t, dir) {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := oslayerRun(t, append([]string{"render", "--pool", "worker", "--output-dir", out}, tc.args...)...)
			checkBadInput(t, px, out, code, stdout, stderr, tc.want)
		})
	}
}

// An imageRef file a registry fails to give (down: a closed port; or
// answering 500) is a failure, not bad input: build and render exit 1,
// naming the OSC and field, and write nothing.
func TestImageRefRegistryFailureExit1(t *testing.T) {
	t.Setenv("OSLAYER_BASEINDEX_CACHE", t.TempDir())
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	failing := regtest.NewProxy(t, regtest.Memory(t).Host)
	failing.SetFail(func(*http.Request) int { return http.StatusInternalServerError })
	px := regtest.NewProxy(t, regtest.Memory(t).Host)
	out := filepath.Join(dir, "out")
	hosts := []string{closed, failing.Host}
	if testing.Short() {
		// Each command retries with a backoff (about 4 s): the unit loop
		// runs render against the closed port; test/run.sh runs all three.
		hosts = hosts[:1]
	}
	for _, host := range hosts {
		osc := filepath.Join(dir, "imageref.yaml")
		if err := os.WriteFile(osc, []byte(oscWithFile("    content: {imageRef: {image: "+host+"/tools/x:1, filePathInImage: /x}}\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		cmds := [][]string{{"render", "--output-dir", out}}
		if host == closed && !testing.Short() {
			// A 500 is retried with a backoff (seconds): render stands
			// for both.
			cmds = append(cmds, []string{"build", "--base", "oci:" + example(t, "base"), "--push", px.Host + "/os/worker:latest"})
		}
		for _, args := range cmds {
			args = append(args, "--pool", "worker", "--osc", osc, "--imageref-timeout", "20s")
			code, stdout, stderr := oslayerRun(t, args...)
			if want := osc + " (OperatingSystemConfig bad) spec.files[0]: /etc/oslayer-test: content.imageRef"; code != 1 || !strings.Contains(stderr, want) || stdout != "" {
				t.Errorf("%s with %s: exit %d, stdout %q, stderr %q; want 1 naming %q", args[0], host, code, stdout, stderr, want)
			}
		}
	}
	checkBadInput(t, px, out, 2, "", "", nil)
}
