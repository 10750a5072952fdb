package diff

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/BurntSushi/toml"
	"go.podman.io/image/v5/pkg/sysregistriesv2"

	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/sources/machineconfig"
)

// specialPool is the custom pool of the MCO's e2e tests.
const specialPool = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: special
spec:
  machineConfigSelector:
    matchExpressions:
    - {key: machineconfiguration.openshift.io/role, operator: In, values: [worker, special]}
`

// poolSide renders a directory of MachineConfigs for the pool in file pool.
func poolSide(t *testing.T, pool, dir string) *Side {
	t.Helper()
	s, err := LoadInputs(context.Background(), dir, render.Request{MachineConfigs: []string{dir}, MachineConfigPools: []string{pool}, Pool: "special"}, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// registriesConfOf decodes the AWS worker pool's registries.conf.
func registriesConfOf(t *testing.T) string {
	t.Helper()
	var src string
	copyPool(t, map[string]func(map[string]any){"01-worker-container-runtime.yaml": func(mc map[string]any) {
		for _, f := range field(mc, "spec", "config", "storage", "files").([]any) {
			if fm := f.(map[string]any); fm["path"] == pathRegistriesConf {
				src = str(field(fm, "contents", "source"))
			}
		}
	}})
	data, err := machineconfig.DecodeDataURL(src, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestNodeDisruptionPolicySpecialActionPairs runs the pairs of the MCO's
// e2e TestNodeDisruptionPolicySpecialAction on the real AWS worker pool:
// a MachineConfig that adds "test.io" to the unqualified-search
// registries reloads crio without a drain; removing it again drains.
func TestNodeDisruptionPolicySpecialActionPairs(t *testing.T) {
	var reg sysregistriesv2.V2RegistriesConf
	if _, err := toml.Decode(registriesConfOf(t), &reg); err != nil {
		t.Fatal(err)
	}
	reg.UnqualifiedSearchRegistries = append(reg.UnqualifiedSearchRegistries, "test.io")
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(reg); err != nil {
		t.Fatal(err)
	}
	// The test's pool (helpers.CreatePoolAndApplyMC): worker MachineConfigs
	// and its own, which the MCO merges last.
	pool := filepath.Join(t.TempDir(), "pool.yaml")
	if err := os.WriteFile(pool, []byte(specialPool), 0o644); err != nil {
		t.Fatal(err)
	}
	without := copyPool(t, nil)
	with := copyPool(t, nil)
	writeRoleMC(t, with, mcArgs{name: "01-test", files: []any{map[string]any{"path": pathRegistriesConf, "contents": buf.String()}}}, "special")
	a, b := poolSide(t, pool, without), poolSide(t, pool, with)
	for _, c := range []struct {
		name     string
		old, new *Side
		drain    bool
	}{{"add test.io", a, b, false}, {"remove test.io", b, a, true}} {
		r, err := Compare(c.old, c.new, Options{})
		if err != nil {
			t.Fatal(err)
		}
		os := r.Platform(PlatformOpenShift)
		want := Reload
		if c.drain {
			want = Drain
		}
		if len(os.MCOActions) != 1 || os.MCOActions[0] != "Special" || os.Drain != c.drain || os.Action != want {
			t.Errorf("%s: daemon %v, drain %v, action %s; the MCO: [Special], drain %v", c.name, os.MCOActions, os.Drain, os.Action, c.drain)
		}
	}
}
