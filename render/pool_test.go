package render

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/test/fixtures"
)

// templateList turns an OpenShift Template fixture into a List of its
// objects with ${NAME} set to name, written to a temporary file.
func templateList(t *testing.T, path, name string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Objects []any `json:"objects"`
	}
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(string(data), "${NAME}", name)), &tmpl); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": tmpl.Objects})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMachineConfigPoolFixtures: the MCO's own pool manifests select the
// same MachineConfigs as --pool; a custom pool made from the MCO's custom
// pool template (role In [worker, infra]) inherits every worker config and
// adds its own, whose /home/core/test goes through the /var mechanism.
func TestMachineConfigPoolFixtures(t *testing.T) {
	dir := fixtures.Dir(t)
	ctx := context.Background()
	workerMCs := filepath.Join(dir, "mco", "aws", "worker")
	byRole, err := Render(ctx, Request{MachineConfigs: []string{workerMCs}, Pool: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	byPool, err := Render(ctx, Request{MachineConfigs: []string{workerMCs},
		MachineConfigPools: []string{filepath.Join(dir, "mco", "pools", "worker.machineconfigpool.yaml"), filepath.Join(dir, "mco", "pools", "master.machineconfigpool.yaml")}, Pool: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := listing(byRole.tree), listing(byPool.tree); a != b {
		t.Errorf("the worker MachineConfigPool selects differently from --pool worker")
	}
	if byRole.InputsDigest == byPool.InputsDigest {
		t.Errorf("the pool document is not an input")
	}

	infraPool := templateList(t, filepath.Join(dir, "mco", "pools", "custom-machine-config-pool.yaml"), "infra")
	infraMC := templateList(t, filepath.Join(dir, "mco", "misc", "extended-priv-templates", "machineconfigs-infra-testfile-mc.yaml"), "infra")
	masterMC := filepath.Join(dir, "mco", "aws", "master")
	res, err := Render(ctx, Request{MachineConfigs: []string{workerMCs, masterMC, infraMC}, MachineConfigPools: []string{infraPool}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range byRole.tree.Entries() {
		if strings.HasPrefix(e.Path, "/usr/lib/oslayer/") || strings.HasPrefix(e.Path, "/usr/lib/tmpfiles.d/") {
			continue // the manifest and the /var lists gain the infra file
		}
		if g, ok := res.tree.Get(e.Path); !ok || g.Kind != e.Kind || g.Mode != e.Mode || string(g.Data) != string(e.Data) || g.Target != e.Target {
			t.Errorf("infra pool lacks the worker pool's %s", e.Path)
		}
	}
	if e, ok := res.tree.Get("/usr/lib/oslayer/var/var/home/core/test"); !ok || string(e.Data) != "hello world\n" || e.Mode != 0o644 {
		t.Errorf("/home/core/test of 90-infra-testfile not stored for /var/home/core/test: %+v", e)
	}
	for _, in := range res.Inputs {
		if in.Kind == "MachineConfig" && strings.Contains(in.Path, "/master/") {
			t.Errorf("master config %s selected by the infra pool", in.Name)
		}
	}
	got := summaryText(res)
	got = strings.ReplaceAll(got, dir+string(filepath.Separator), "")
	got = strings.ReplaceAll(got, filepath.Dir(infraMC)+string(filepath.Separator), "")
	golden(t, "mco-aws-infra-pool.txt", got)
}
