package diff

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	opv1 "github.com/openshift/api/operator/v1"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/test/fixtures"
)

// The real MachineConfigs of an AWS worker pool (rendered by the MCO at
// 7ff337a4ffac): test/fixtures/testdata/mco/aws/worker.
var awsWorker = []string{"00-worker.yaml", "01-worker-container-runtime.yaml", "01-worker-kubelet.yaml"}

// copyPool copies the AWS worker MachineConfigs into a new directory,
// applying edit (document name → change) on the way.
func copyPool(t *testing.T, edit map[string]func(mc map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range awsWorker {
		data, err := os.ReadFile(fixtures.Path(t, "mco", "aws", "worker", name))
		if err != nil {
			t.Fatal(err)
		}
		if f := edit[name]; f != nil {
			var mc map[string]any
			if err := yaml.Unmarshal(data, &mc); err != nil {
				t.Fatal(err)
			}
			f(mc)
			if data, err = yaml.Marshal(mc); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// field walks a decoded document by keys and list indexes.
func field(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

// setFile replaces the content of the Ignition file at path.
func setFile(path, content string) func(map[string]any) {
	return func(mc map[string]any) {
		for _, f := range field(mc, "spec", "config", "storage", "files").([]any) {
			if fm := f.(map[string]any); fm["path"] == path {
				fm["contents"] = map[string]any{"source": "data:," + content}
				return
			}
		}
		panic("no file " + path)
	}
}

// policyFile writes a MachineConfiguration with one spec.nodeDisruptionPolicy
// entry (files, units or sshkey) and returns its merged policies.
func policyFile(t *testing.T, kind string, entry map[string]any) Options {
	t.Helper()
	doc := map[string]any{"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
		"metadata": map[string]any{"name": "cluster"},
		"spec":     map[string]any{"managementState": "Managed", "nodeDisruptionPolicy": map[string]any{kind: entry}}}
	if kind != "sshkey" {
		doc["spec"].(map[string]any)["nodeDisruptionPolicy"] = map[string]any{kind: []any{entry}}
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePolicy("cluster.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	return Options{Policies: &p, PolicyName: "cluster.yaml"}
}

// TestNodeDisruptionPoliciesE2E runs the pairs of the MCO's e2e test
// TestNodeDisruptionPolicies (testFilePolicy, testUnitPolicy,
// testSSHKeyPolicy, each with every action of testActionsAlpha, Beta and
// Gamma) on the real AWS worker pool: adding the test MachineConfig under
// a MachineConfiguration whose policy names the action must give exactly
// that action.
func TestNodeDisruptionPoliciesE2E(t *testing.T) {
	e := newEval()
	const file = "nodedisrupt_test.go.txt"
	var actions []any
	for _, set := range []string{"testActionsAlpha", "testActionsBeta", "testActionsGamma"} {
		actions = append(actions, list(evalVar(t, e, file, set))...)
	}
	if len(actions) != 6 {
		t.Fatalf("%d actions, the MCO's e2e test at 7ff337a4ffac has 6", len(actions))
	}
	oldDir := copyPool(t, nil)
	old := renderSide(t, "worker", oldDir)
	pairs := 0
	for _, a := range actions {
		act := lowerKeys(a).(map[string]any)
		typ := str(act["type"])
		for _, kind := range []string{"files", "units", "sshkey"} {
			t.Run(kind+"/"+typ, func(t *testing.T) {
				mc, entry := e2eMC(kind, typ, act)
				dir := copyPool(t, nil)
				writeRoleMC(t, dir, mc, "worker")
				new := renderSide(t, "worker", dir)
				r, err := Compare(old, new, policyFile(t, kind, entry))
				if err != nil {
					t.Fatal(err)
				}
				var want []opv1.NodeDisruptionPolicySpecAction
				asAPI(t, []any{a}, &want)
				got := r.Platform(PlatformOpenShift).MCOActions
				if w := actionNames(statusActions(want)); !slices.Equal(got, w) {
					t.Errorf("daemon actions %v, the MCO performs %v (change %+v)", got, w, r.MCO)
				}
			})
			pairs++
		}
	}
	if pairs != 18 {
		t.Fatalf("%d pairs, want 18", pairs)
	}
}

// e2eMC is the test MachineConfig and policy entry of testFilePolicy
// ("/etc/test-" + type, content "test\n"), testUnitPolicy (type +
// "-test.service", contents "test") and testSSHKeyPolicy (key "test").
func e2eMC(kind, typ string, action map[string]any) (mcArgs, map[string]any) {
	switch kind {
	case "files":
		p := "/etc/test-" + typ
		return mcArgs{name: "01-test-file", files: []any{map[string]any{"path": p, "contents": "test\n"}}},
			map[string]any{"path": p, "actions": []any{action}}
	case "units":
		u := typ + "-test.service"
		return mcArgs{name: "01-test-unit", units: []any{map[string]any{"Name": u, "Contents": "test"}}},
			map[string]any{"name": u, "actions": []any{action}}
	}
	return mcArgs{name: "01-test-ssh", ssh: []any{"test"}}, map[string]any{"actions": []any{action}}
}

// fixturePair is a change to the real AWS worker pool with the daemon's
// decision as the MCO's code makes it (pkg/daemon/update.go,
// pkg/apihelpers defaults).
type fixturePair struct {
	name   string
	edit   map[string]func(map[string]any)
	extra  *mcArgs // a MachineConfig added to both sides, with newSSH on NEW
	newSSH []any
	mco    []string // NodeDisruptionPolicy actions
	legacy []string // first-boot actions
	action Action
}

var fixturePairs = []fixturePair{
	{name: "pull secret", edit: map[string]func(map[string]any){"00-worker.yaml": setFile(pathKubeletAuth, "%7B%22auths%22%3A%7B%7D%7D")},
		mco: []string{"None"}, legacy: []string{LegacyNone}, action: None},
	{name: "ssh key", extra: &mcArgs{name: "99-worker-ssh", ssh: []any{"ssh-ed25519 AAAA old"}}, newSSH: []any{"ssh-ed25519 AAAA new"},
		mco: []string{"None"}, legacy: []string{LegacyNone}, action: None},
	{name: "registries.conf", edit: map[string]func(map[string]any){"01-worker-container-runtime.yaml": setFile(pathRegistriesConf, "unqualified-search-registries%20%3D%20%5B%22test.io%22%5D%0A")},
		mco: []string{"Special"}, legacy: []string{LegacyReloadCrio}, action: Drain},
	{name: "policy.json", edit: map[string]func(map[string]any){"01-worker-container-runtime.yaml": setFile(pathPolicyJSON, "%7B%7D")},
		mco: []string{"Reload crio.service"}, legacy: []string{LegacyReloadCrio}, action: Reload},
	{name: "user CA bundle", edit: map[string]func(map[string]any){"00-worker.yaml": setFile(pathUserCABundle, "new")},
		mco: []string{"Restart coreos-update-ca-trust.service", "Restart crio.service"}, legacy: []string{LegacyRestartCrio}, action: Restart},
	{name: "sysctl", edit: map[string]func(map[string]any){"00-worker.yaml": setFile("/etc/sysctl.d/inotify.conf", "fs.inotify.max_user_watches%20%3D%2065536%0A")},
		mco: []string{"Reboot"}, legacy: []string{LegacyReboot}, action: Reboot},
	{name: "kernel argument", edit: map[string]func(map[string]any){"00-worker.yaml": func(mc map[string]any) {
		mc["spec"].(map[string]any)["kernelArguments"] = []any{"nosmt"}
	}}, mco: []string{"Reboot"}, legacy: []string{LegacyReboot}, action: Reboot},
	{name: "extension", edit: map[string]func(map[string]any){"00-worker.yaml": func(mc map[string]any) {
		mc["spec"].(map[string]any)["extensions"] = []any{"usbguard"}
	}}, mco: []string{"Reboot"}, legacy: []string{LegacyReboot}, action: Reboot},
	{name: "unit", edit: map[string]func(map[string]any){"00-worker.yaml": func(mc map[string]any) {
		u := field(mc, "spec", "config", "systemd", "units", 1).(map[string]any)
		u["contents"] = fmt.Sprint(u["contents"]) + "\n# changed\n"
	}}, mco: []string{"Reboot"}, legacy: []string{LegacyReboot}, action: Reboot},
}

// TestFixturePairs diffs changes to the real AWS worker pool.
func TestFixturePairs(t *testing.T) {
	for _, p := range fixturePairs {
		t.Run(p.name, func(t *testing.T) {
			oldDir, newDir := copyPool(t, nil), copyPool(t, p.edit)
			if p.extra != nil {
				writeRoleMC(t, oldDir, *p.extra, "worker")
				n := *p.extra
				n.ssh = p.newSSH
				writeRoleMC(t, newDir, n, "worker")
			}
			r, err := Compare(renderSide(t, "worker", oldDir), renderSide(t, "worker", newDir), Options{})
			if err != nil {
				t.Fatal(err)
			}
			os := r.Platform(PlatformOpenShift)
			if !slices.Equal(os.MCOActions, p.mco) || !slices.Equal(os.LegacyActions, p.legacy) || os.Action != p.action {
				t.Errorf("daemon %v, first boot %v, action %s; the MCO: %v, %v, %s (change %+v)", os.MCOActions, os.LegacyActions, os.Action, p.mco, p.legacy, p.action, r.MCO)
			}
			if img := r.Platform(PlatformOpenShiftImage); img.Action != Reboot {
				t.Errorf("a new osImageURL: %s, want reboot", img.Action)
			}
			// bootc: a soft reboot unless kernel arguments or packages change.
			want := SoftReboot
			if p.name == "kernel argument" || p.name == "extension" {
				want = Reboot
			}
			if b := r.Platform(PlatformBootc); b.Action != want {
				t.Errorf("bootc %s, want %s", b.Action, want)
			}
		})
	}
}
