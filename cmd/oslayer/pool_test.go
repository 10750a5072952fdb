package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The pool built must be the inputs' pool: an OSC labelled for another
// worker pool, and MachineConfigs of several roles without --pool, are
// errors that say what to give; nothing is written.
func TestPoolMismatch(t *testing.T) {
	ex := func(p ...string) string { return example(t, p...) }
	out := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "--base", "oci:" + ex("base"), "--pool", "master", "--osc", ex("gardener", "worker-osc.yaml"), "--push", "oci:" + filepath.Join(out, "b")},
			`is labelled worker.gardener.cloud/pool=worker, but the pool built is "master" (--pool)`},
		{[]string{"render", "--pool", "master", "--osc", ex("gardener", "worker-osc.yaml"), "--output-dir", filepath.Join(out, "r1")},
			`but the pool built is "master"`},
		{[]string{"render", "--machineconfig", ex("openshift"), "--output-dir", filepath.Join(out, "r2")},
			"the MachineConfigs are for 2 roles (master, worker labelled machineconfiguration.openshift.io/role): give --pool"},
	} {
		if text, err := runCLI(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q\n%s", c.args, err, c.want, text)
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(out, "*")); len(ents) != 0 {
		t.Errorf("refused commands wrote %v", ents)
	}
}
