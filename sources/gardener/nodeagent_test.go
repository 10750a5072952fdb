package gardener_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/sources/gardener"
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

// TestContainerdCRIConfig: for a containerd criConfig the node agent adds
// containerd.service (with its runtime PATH drop-in) to the OSC's units
// before status.extensionUnits are merged (containerd.go
// addContainerdEnvironmentDropIn), so it enables and restarts containerd
// unless the OSC says otherwise, and keeps containerd.service.d.
func TestContainerdCRIConfig(t *testing.T) {
	const cri = "  criConfig:\n    name: containerd\n    cgroupDriver: systemd\n    containerd:\n      sandboxImage: registry.k8s.io/pause:3.10\n"
	const osc = "apiVersion: extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfig\nmetadata:\n  name: c\nspec:\n  type: coreos\n  purpose: reconcile\n"
	cases := []struct {
		name, doc string
		// want is the containerd.service unit: "" for none, else
		// "enabled start keepDropIns field".
		want string
	}{
		{"criConfig", osc + cri, "true true true spec.criConfig"},
		{"without containerd section", osc + "  criConfig:\n    name: containerd\n", ""},
		{"no criConfig", osc + "  units:\n  - name: containerd.service\n", "true true false spec.units[0]"},
		{"disabled in spec.units", osc + cri + "  units:\n  - name: containerd.service\n    enable: false\n", "false false true spec.units[0]"},
		{"stopped by an extension", osc + cri + "status:\n  extensionUnits:\n  - name: containerd.service\n    command: stop\n", "true false true spec.criConfig"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := gardener.Decode(context.Background(), "c.yaml", []byte(c.doc), gardener.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, u := range cfg.Units {
				if u.Name == gardener.ContainerdUnit {
					got = fmt.Sprintf("%v %v %v %s", *u.Enabled, u.StartOnApply, !u.ClearDropIns, u.Origin.Field)
					if u.Contents != nil || len(u.DropIns) != 0 {
						t.Errorf("containerd.service has contents or drop-ins: %+v", u)
					}
				}
			}
			if got != c.want {
				t.Errorf("containerd.service %q, want %q", got, c.want)
			}
		})
	}
}

// TestContainerdCRIConfigImage renders a containerd criConfig onto a base
// that ships containerd.service and a drop-in of its own: the image enables
// containerd through the unit's [Install] (the link systemctl enable makes,
// as the node agent's dbus Enable), keeps the base's drop-in, and reports
// the CRI configuration as runtime-delivered.
func TestContainerdCRIConfigImage(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "osc.yaml")
	doc := "apiVersion: extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfig\nmetadata:\n  name: c\nspec:\n  type: coreos\n  purpose: reconcile\n" +
		"  criConfig:\n    name: containerd\n    containerd: {}\n"
	if err := os.WriteFile(in, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	base := fstest.MapFS{
		"usr/lib/systemd/system/containerd.service":            {Data: []byte("[Service]\nExecStart=/usr/bin/containerd\n[Install]\nWantedBy=multi-user.target\n")},
		"usr/lib/systemd/system/multi-user.target":             {Data: []byte("[Unit]\nDescription=Multi-User System\n")},
		"etc/systemd/system/containerd.service.d/50-base.conf": {Data: []byte("[Service]\nLimitNOFILE=1048576\n")},
	}
	res, err := render.Render(context.Background(), render.Request{OSCs: []string{in}, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := res.WriteDir(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(out, "rootfs")
	link := filepath.Join(root, "etc/systemd/system/multi-user.target.wants", gardener.ContainerdUnit)
	if target, err := os.Readlink(link); err != nil || target != "/usr/lib/systemd/system/containerd.service" {
		t.Errorf("enablement link: %q, %v", target, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/systemd/system/.wh.containerd.service.d")); err == nil {
		t.Errorf("the image removes the base's containerd.service.d, which the node agent keeps")
	}
	for _, w := range res.Report.Warnings {
		if strings.Contains(w, "containerd.service") {
			t.Errorf("warning about containerd.service: %s", w)
		}
	}
	found := false
	for _, r := range res.Report.Runtime {
		found = found || r.Item == "spec.criConfig" && r.Reason == gardener.ReasonCRI
	}
	if !found {
		t.Errorf("spec.criConfig not reported as runtime-delivered: %+v", res.Report.Runtime)
	}
}
