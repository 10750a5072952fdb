package gardener_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/layers/gardener"
)

// TestNodeAgentFileModes: modes as gardener-node-agent writes them: the
// umask 0022 of its service for inline (and secretRef) files, none for
// imageRef files (chmod), setuid/setgid/sticky dropped, 0600 by default;
// unit files and drop-ins 0600.
func TestNodeAgentFileModes(t *testing.T) {
	cases := []struct {
		perm     string // "" = unset
		imageRef bool
		want     uint32
		warn     bool
	}{
		{"", false, 0o600, false},
		{"", true, 0o600, false},
		{"420", false, 0o644, false}, // 0644
		{"511", false, 0o755, false}, // 0777: umask
		{"511", true, 0o777, false},  // 0777: chmod, no umask
		{"438", false, 0o644, false}, // 0666
		{"2541", false, 0o755, true}, // 04755: setuid dropped
		{"1533", true, 0o775, true},  // 02775: setgid dropped
		{"1023", false, 0o755, true}, // 01777: sticky dropped, umask
		{"4095", true, 0o777, true},  // 07777
		{"448", false, 0o700, false}, // 0700
		{"146", false, 0o200, false}, // 0222: group/other write masked
		{"0", false, 0o000, false},   // explicit 0
	}
	for _, c := range cases {
		content := "      inline: {data: x}\n"
		if c.imageRef {
			content = "      imageRef: {image: example.com/img:1, filePathInImage: /bin/x}\n"
		}
		doc := head + "  files:\n  - path: /etc/x\n"
		if c.perm != "" {
			doc += "    permissions: " + c.perm + "\n"
		}
		doc += "    content:\n" + content + "  units:\n  - name: u.service\n    content: \"[Service]\\nExecStart=/bin/true\\n\"\n    dropIns: [{name: 10-x.conf, content: \"[Unit]\\n\"}]\n"
		cfg, err := gardener.Decode(context.Background(), "m.yaml", []byte(doc), gardener.Options{Images: &fakeImages{}})
		if err != nil {
			t.Fatalf("%s imageRef=%t: %v", c.perm, c.imageRef, err)
		}
		if got := cfg.Files[0].Mode; got != c.want {
			t.Errorf("permissions %s imageRef=%t: mode %04o, want %04o", c.perm, c.imageRef, got, c.want)
		}
		warned := strings.Contains(strings.Join(cfg.Warnings, "\n"), "drops the setuid, setgid and sticky bits")
		if warned != c.warn {
			t.Errorf("permissions %s: warnings %q", c.perm, cfg.Warnings)
		}
		if u := cfg.Units[0]; u.FileMode != 0o600 {
			t.Errorf("unit file mode %04o, want 0600", u.FileMode)
		}
	}
}

// TestNodeAgentUnitCommands: enablement and start-on-apply for every
// combination of enable and command, and for gardener-node-agent.service,
// as the node agent's applyChangedUnits and getCommandToExecute treat them.
func TestNodeAgentUnitCommands(t *testing.T) {
	type want struct {
		enabled, start, warn bool
	}
	cases := map[string]want{
		// enable, command
		"- -":                                    {true, true, false},
		"- start":                                {true, true, false},
		"- restart":                              {true, true, false},
		"- stop":                                 {true, false, true},
		"true -":                                 {true, true, false},
		"true stop":                              {true, false, true},
		"false -":                                {false, false, false},
		"false start":                            {false, false, false},
		"false stop":                             {false, false, false},
		"gardener-node-agent.service false stop": {true, true, false},
		"gardener-node-agent.service false -":    {true, true, false},
		"gardener-node-agent.service - stop":     {true, true, false},
		"gardener-node-agent.service true restart": {true, true, false},
	}
	for k, w := range cases {
		f := strings.Fields(k)
		name := "u.service"
		if len(f) == 3 {
			name, f = f[0], f[1:]
		}
		doc := head + "  units:\n  - name: " + name + "\n    content: \"[Service]\\nExecStart=/bin/true\\n\"\n"
		if f[0] != "-" {
			doc += "    enable: " + f[0] + "\n"
		}
		if f[1] != "-" {
			doc += "    command: " + f[1] + "\n"
		}
		cfg, err := gardener.Decode(context.Background(), "u.yaml", []byte(doc), gardener.Options{})
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		u := cfg.Units[0]
		warned := strings.Contains(strings.Join(cfg.Warnings, "\n"), "has command stop but is not disabled")
		if name == gardener.NodeAgentUnit && (f[0] == "false" || f[1] == "stop") && !strings.Contains(strings.Join(cfg.Warnings, "\n"), "always enables and restarts its own unit") {
			t.Errorf("%s: warnings %q", k, cfg.Warnings)
		}
		if got := (want{*u.Enabled, u.StartOnApply, warned}); got != w {
			t.Errorf("%s: enabled/startOnApply/warning = %v, want %v (warnings %q)", k, got, w, cfg.Warnings)
		}
	}
}

// TestProvisionRefused: an OSC of purpose provision (per-machine user data)
// is refused with the reason, also inside a Secret.
func TestProvisionRefused(t *testing.T) {
	doc := strings.Replace(head, "purpose: reconcile", "purpose: provision", 1) + "  files:\n  - path: /etc/x\n    content: {inline: {data: \"<<BOOTSTRAP_TOKEN>>\"}}\n"
	_, err := gardener.Decode(context.Background(), "p.yaml", []byte(doc), gardener.Options{})
	want := `p.yaml: spec.purpose is "provision": a provision OperatingSystemConfig is the per-machine user data that bootstraps gardener-node-agent (placeholders such as <<BOOTSTRAP_TOKEN>> and <<MACHINE_NAME>> are filled in for each machine), not pool content`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
	secret := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: kube-system}\nstringData:\n  osc.yaml: %q\n", doc)
	_, err = gardener.Decode(context.Background(), "s.yaml", []byte(secret), gardener.Options{})
	if err == nil || !strings.Contains(err.Error(), `s.yaml: data[osc.yaml].spec.purpose is "provision"`) {
		t.Errorf("in a Secret: err = %v", err)
	}
}
