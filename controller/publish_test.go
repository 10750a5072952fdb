package controller

import (
	"os"
	"strings"
	"testing"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/test/fixtures"
)

// TestPoolRole: the role label of the published MachineConfig for the
// MCO's own pools (worker, master) and a custom pool that inherits the
// worker MachineConfigs (the MCO's test template, NAME=infra): the pool's
// name, which its selector selects; an explicit role must be selected;
// a pool whose selector selects no single role is an error naming it.
func TestPoolRole(t *testing.T) {
	pool := func(file, name string) *mcfgv1.MachineConfigPool {
		t.Helper()
		b, err := os.ReadFile(fixtures.Path(t, "mco", "pools", file))
		if err != nil {
			t.Fatal(err)
		}
		if name != "" {
			// The template's one object, with its parameter set.
			var tmpl struct {
				Objects []mcfgv1.MachineConfigPool `json:"objects"`
			}
			if err := yaml.Unmarshal([]byte(strings.ReplaceAll(string(b), "${NAME}", name)), &tmpl); err != nil || len(tmpl.Objects) != 1 {
				t.Fatalf("%s: %v", file, err)
			}
			return &tmpl.Objects[0]
		}
		var mcp mcfgv1.MachineConfigPool
		if err := yaml.UnmarshalStrict(b, &mcp); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		return &mcp
	}
	worker, master := pool("worker.machineconfigpool.yaml", ""), pool("master.machineconfigpool.yaml", "")
	infra := pool("custom-machine-config-pool.yaml", "infra")
	for _, c := range []struct {
		mcp        *mcfgv1.MachineConfigPool
		want, role string
	}{
		{worker, "", "worker"},
		{master, "", "master"},
		{infra, "", "infra"},
		{infra, "worker", "worker"}, // selected too, if that is what is wanted
	} {
		got, err := poolRole(c.mcp, c.want)
		if err != nil || got != c.role {
			t.Errorf("pool %s, role %q: %q, %v; want %q", c.mcp.Name, c.want, got, err, c.role)
		}
	}
	if _, err := poolRole(worker, "infra"); err == nil || !strings.Contains(err.Error(), "MachineConfigPool worker spec.machineConfigSelector") {
		t.Errorf("a role the worker pool does not select: %v", err)
	}
	odd := worker.DeepCopy()
	odd.Name = "odd"
	odd.Spec.MachineConfigSelector.MatchLabels = map[string]string{"example.com/tier": "gold"}
	if _, err := poolRole(odd, ""); err == nil || !strings.Contains(err.Error(), "set spec.publish.machineConfig.role") {
		t.Errorf("a pool selecting by another label: %v", err)
	}
	odd.Spec.MachineConfigSelector = nil
	if _, err := poolRole(odd, ""); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("a pool without a selector: %v", err)
	}
}
