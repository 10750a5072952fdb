package machineconfig_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/oslayer/oslayer/sources/machineconfig"
	"github.com/oslayer/oslayer/sources/model"
)

// mcDoc is a MachineConfig with role and an Ignition config body (JSON).
func mcDoc(name, role, ign string) string {
	return `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: ` + name + `
  labels:
    machineconfiguration.openshift.io/role: ` + role + `
spec:
  config: ` + ign + "\n"
}

func fileData(t *testing.T, cfg *model.Config, path string) string {
	t.Helper()
	for _, f := range cfg.Files {
		if f.Path == path {
			return string(f.Data)
		}
	}
	t.Fatalf("no file %s in %+v", path, cfg.Files)
	return ""
}

// TestCompressionOverride: a later MachineConfig writing a path plain where
// an earlier one wrote it gzip-compressed (and the reverse) gives the later
// content, as the MCO's merge does.
func TestCompressionOverride(t *testing.T) {
	gzHello := gz(t, []byte("hello from gzip\n"))
	gzFile := `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x","contents":{"compression":"gzip","source":"data:;base64,` + gzHello + `"}}]}}`
	plainFile := `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,plain"}}]}}`
	for _, c := range []struct{ name, first, second, want string }{
		{"gzip then plain", gzFile, plainFile, "plain"},
		{"plain then gzip", plainFile, gzFile, "hello from gzip\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stream := mcDoc("10-a", "worker", c.first) + "---\n" + mcDoc("20-b", "worker", c.second)
			cfg, err := machineconfig.Decode(context.Background(), "mcs.yaml", []byte(stream), machineconfig.Options{Pool: "worker"})
			if err != nil {
				t.Fatal(err)
			}
			if got := fileData(t, cfg, "/etc/x"); got != c.want {
				t.Errorf("/etc/x = %q, want %q", got, c.want)
			}
			if o := cfg.Files[0].Origin.Name; o != "20-b" {
				t.Errorf("origin %s, want 20-b", o)
			}
		})
	}
}

// TestSpec2Conversion: an Ignition spec 2.2 config is converted as the MCO
// converts it: duplicates inside the config dropped (last entry wins, drop-
// ins of a dropped unit kept), the legacy "enable" honoured, the
// filesystem "root" mapped to /.
func TestSpec2Conversion(t *testing.T) {
	ign := `{"ignition":{"version":"2.2.0"},
"storage":{"files":[
 {"filesystem":"root","path":"/etc/a","mode":420,"contents":{"source":"data:,first"}},
 {"filesystem":"root","path":"/etc/b","mode":384,"user":{"id":5},"contents":{"source":"data:,b"}},
 {"filesystem":"root","path":"/etc/a","mode":493,"contents":{"source":"data:,second"}}]},
"systemd":{"units":[
 {"name":"u.service","contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n","dropins":[{"name":"a.conf","contents":"[Unit]\n"},{"name":"b.conf","contents":"[Unit]\nX=old\n"}]},
 {"name":"u.service","enable":true,"contents":"[Service]\nExecStart=/bin/false\n[Install]\nWantedBy=multi-user.target\n","dropins":[{"name":"b.conf","contents":"[Unit]\nX=new\n"}]},
 {"name":"m.service","mask":true}]},
"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA one"]},{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA two"]}]}}`
	ign = strings.ReplaceAll(ign, "\n", "")
	cfg, err := machineconfig.Decode(context.Background(), "v2.yaml", []byte(mcDoc("99-v2", "worker", ign)), machineconfig.Options{Pool: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fileData(t, cfg, "/etc/a"); got != "second" {
		t.Errorf("/etc/a = %q, want the last entry", got)
	}
	for _, f := range cfg.Files {
		switch f.Path {
		case "/etc/a":
			if f.Mode != 0o755 {
				t.Errorf("/etc/a mode %o", f.Mode)
			}
		case "/etc/b":
			if f.Mode != 0o600 || f.UID != 5 {
				t.Errorf("/etc/b mode %o uid %d", f.Mode, f.UID)
			}
		}
	}
	var u, m *model.Unit
	for i := range cfg.Units {
		switch cfg.Units[i].Name {
		case "u.service":
			u = &cfg.Units[i]
		case "m.service":
			m = &cfg.Units[i]
		}
	}
	if u == nil || m == nil || !m.Mask {
		t.Fatalf("units %+v", cfg.Units)
	}
	if u.Contents == nil || !strings.Contains(*u.Contents, "/bin/false") || u.Enabled == nil || !*u.Enabled {
		t.Errorf("u.service: want the last entry, enabled: %+v", u)
	}
	drop := map[string]string{}
	for _, d := range u.DropIns {
		drop[d.Name] = d.Contents
	}
	if len(drop) != 2 || drop["b.conf"] != "[Unit]\nX=new\n" || drop["a.conf"] != "[Unit]\n" {
		t.Errorf("drop-ins %q: want b.conf of the last entry plus a.conf of the dropped one", drop)
	}
	if len(cfg.Runtime) != 1 || cfg.Runtime[0].Item != "passwd.users[core]" {
		t.Errorf("runtime %+v", cfg.Runtime)
	}

	// The MCO refuses users other than core in a spec 2 config.
	bad := strings.Replace(ign, `"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA two"]`, `"name":"bob"`, 1)
	_, err = machineconfig.Decode(context.Background(), "v2.yaml", []byte(mcDoc("99-v2", "worker", bad)), machineconfig.Options{})
	if err == nil || !strings.Contains(err.Error(), "v2.yaml (MachineConfig 99-v2) spec.config: unexpected user with name: bob. Only core user is supported") {
		t.Errorf("err = %v", err)
	}
}

const infraPool = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: infra
spec:
  machineConfigSelector:
    matchExpressions:
    - key: machineconfiguration.openshift.io/role
      operator: In
      values: [worker, infra]
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/infra: ""
`

// TestMachineConfigPool: a custom pool selecting role in (worker, infra)
// inherits the worker configs, and its own configs override them although
// their names sort first (the MCO merges worker configs first).
func TestMachineConfigPool(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	file := func(path, data string) string {
		return `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"` + path + `","contents":{"source":"data:,` + data + `"}}]}}`
	}
	mcs := write("mcs.yaml", mcDoc("99-worker-x", "worker", file("/etc/x", "worker"))+"---\n"+
		mcDoc("00-infra-x", "infra", file("/etc/x", "infra"))+"---\n"+
		mcDoc("50-worker-only", "worker", file("/etc/w", "w"))+"---\n"+
		mcDoc("50-master", "master", file("/etc/m", "m")))
	pools := write("pools.yaml", infraPool+"---\n"+strings.NewReplacer("name: infra", "name: worker", "operator: In\n      values: [worker, infra]", "operator: In\n      values: [worker]").Replace(infraPool))

	opts, err := machineconfig.LoadPool([]string{pools}, "infra")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := machineconfig.Load(context.Background(), []string{mcs}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := fileData(t, cfg, "/etc/x"); got != "infra" {
		t.Errorf("/etc/x = %q, want the infra pool's own config", got)
	}
	fileData(t, cfg, "/etc/w")
	for _, f := range cfg.Files {
		if f.Path == "/etc/m" {
			t.Errorf("master config selected")
		}
	}
	var kinds []string
	for _, in := range cfg.Inputs {
		kinds = append(kinds, in.Kind+" "+in.Name)
	}
	if want := "MachineConfigPool infra,MachineConfig 50-worker-only,MachineConfig 99-worker-x,MachineConfig 00-infra-x"; strings.Join(kinds, ",") != want {
		t.Errorf("inputs %q, want %q", strings.Join(kinds, ","), want)
	}

	// The worker pool of the same file selects only worker configs.
	opts, err = machineconfig.LoadPool([]string{pools}, "worker")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = machineconfig.Load(context.Background(), []string{mcs}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := fileData(t, cfg, "/etc/x"); got != "worker" {
		t.Errorf("worker pool /etc/x = %q", got)
	}

	for _, c := range []struct{ pools, name, want string }{
		{pools, "", "several MachineConfigPools given (infra, worker): choose one with pool NAME"},
		{pools, "gpu", `no MachineConfigPool named "gpu" among infra, worker`},
		{mcs, "", `kind "MachineConfig" (apiVersion "machineconfiguration.openshift.io/v1") is not a MachineConfigPool`},
		{write("empty.yaml", "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata: {name: e}\nspec: {}\n"), "", "MachineConfigPool e): spec.machineConfigSelector is empty"},
		{write("bad.yaml", strings.Replace(infraPool, "operator: In", "operator: Near", 1)), "", `spec.machineConfigSelector: "Near" is not a valid label selector operator`},
	} {
		opts, err := machineconfig.LoadPool([]string{c.pools}, c.name)
		if err == nil {
			_, err = machineconfig.Load(context.Background(), []string{mcs}, opts)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("pool %s %q: err = %v, want %q", filepath.Base(c.pools), c.name, err, c.want)
		}
	}
}

// TestOwnerNames: user and group names resolve through the base's
// /etc/passwd and nss-altfiles /usr/lib/passwd (and group), /etc first.
func TestOwnerNames(t *testing.T) {
	base := fstest.MapFS{
		"etc/passwd":     {Data: []byte("root:x:0:0:root:/root:/bin/bash\nlocal:x:4000:4000::/home/local:/bin/sh\n")},
		"usr/lib/passwd": {Data: []byte("core:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\nchrony:x:994:992::/var/lib/chrony:/sbin/nologin\nlocal:x:17:17::/:/sbin/nologin\n")},
		"etc/group":      {Data: []byte("root:x:0:\nwheel:x:10:core\n")},
		"usr/lib/group":  {Data: []byte("core:x:1000:\nchrony:x:992:\n")},
	}
	ign := func(user, group string) string {
		return `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x","user":{"name":"` + user + `"},"group":{"name":"` + group + `"}}],` +
			`"links":[{"path":"/etc/l","target":"/etc/x","user":{"name":"` + user + `"}}],"directories":[{"path":"/etc/d","group":{"name":"` + group + `"}}]}}`
	}
	opts := machineconfig.Options{Base: base, BaseName: "quay.io/fedora/fedora-coreos@sha256:abc"}
	for _, c := range []struct {
		user, group string
		uid, gid    int
		err         string
	}{
		{user: "core", group: "wheel", uid: 1000, gid: 10},
		{user: "chrony", group: "chrony", uid: 994, gid: 992},
		{user: "local", group: "core", uid: 4000, gid: 1000},
		{user: "nobody2", group: "core", err: `o.yaml (MachineConfig 10-o) spec.config.storage.files[0]: /etc/x: user.name "nobody2": no such user in /etc/passwd or /usr/lib/passwd of quay.io/fedora/fedora-coreos@sha256:abc`},
		{user: "core", group: "docker", err: `o.yaml (MachineConfig 10-o) spec.config.storage.directories[0]: /etc/d: group.name "docker": no such group in /etc/group or /usr/lib/group of quay.io/fedora/fedora-coreos@sha256:abc`},
	} {
		cfg, err := machineconfig.Decode(context.Background(), "o.yaml", []byte(mcDoc("10-o", "worker", ign(c.user, c.group))), opts)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s:%s: err = %v, want %q", c.user, c.group, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		f, l, d := cfg.Files[0], cfg.Links[0], cfg.Dirs[0]
		if f.UID != c.uid || f.GID != c.gid || l.UID != c.uid || l.GID != 0 || d.UID != 0 || d.GID != c.gid {
			t.Errorf("%s:%s: file %d:%d link %d:%d dir %d:%d, want uid %d gid %d", c.user, c.group, f.UID, f.GID, l.UID, l.GID, d.UID, d.GID, c.uid, c.gid)
		}
		if len(cfg.Warnings) != 0 {
			t.Errorf("warnings %q", cfg.Warnings)
		}
	}

	// Without a base, "core" is assumed to be 1000 and the report says so.
	cfg, err := machineconfig.Decode(context.Background(), "o.yaml", []byte(mcDoc("10-o", "worker", ign("core", "core"))), machineconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f := cfg.Files[0]; f.UID != 1000 || f.GID != 1000 {
		t.Errorf("no base: %d:%d", f.UID, f.GID)
	}
	want := []string{
		`MachineConfig owners: user "core" resolved to 1000 as on Fedora CoreOS and RHCOS: no base image tree was read`,
		`MachineConfig owners: group "core" resolved to 1000 as on Fedora CoreOS and RHCOS: no base image tree was read`,
	}
	if strings.Join(cfg.Warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings %q, want %q", cfg.Warnings, want)
	}
}

// TestMCOFieldRules: kernelType realtime/64k-pages from any MachineConfig
// ("default" never overrides), osImageURL only from MachineConfigs no
// controller generated, as MergeMachineConfigs.
func TestMCOFieldRules(t *testing.T) {
	mk := func(name, extra string) string {
		return strings.Replace(mcDoc(name, "worker", `{"ignition":{"version":"3.4.0"}}`), "spec:\n", "spec:\n"+extra, 1)
	}
	gen := func(name, extra string) string {
		return strings.Replace(mk(name, extra), "  labels:", "  annotations: {machineconfiguration.openshift.io/generated-by-controller-version: v4.20}\n  labels:", 1)
	}
	stream := strings.Join([]string{
		mk("10-user", "  osImageURL: quay.io/user/os@sha256:1111111111111111111111111111111111111111111111111111111111111111\n  kernelType: realtime\n"),
		gen("50-generated", "  osImageURL: quay.io/generated/os:latest\n"),
		mk("90-default", "  kernelType: default\n"),
	}, "---\n")
	cfg, err := machineconfig.Decode(context.Background(), "f.yaml", []byte(stream), machineconfig.Options{Pool: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.KernelType != "realtime" || !strings.HasPrefix(cfg.OSImageURL, "quay.io/user/os@") {
		t.Errorf("kernelType %q osImageURL %q", cfg.KernelType, cfg.OSImageURL)
	}
	_, err = machineconfig.Decode(context.Background(), "f.yaml", []byte(mk("10-x", "  kernelType: rt\n")), machineconfig.Options{})
	if err == nil || !strings.Contains(err.Error(), `spec.kernelType: unknown kernelType "rt"`) {
		t.Errorf("err = %v", err)
	}
}

// TestEmptyConfig: an absent or null spec.config is no config (the MCO
// skips it); an empty object has no Ignition version and the MCO refuses
// it, so does oslayer.
func TestEmptyConfig(t *testing.T) {
	head := "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 10-k, labels: {machineconfiguration.openshift.io/role: worker}}\nspec:\n  kernelArguments: [nosmt]\n"
	for _, c := range []struct{ config, err string }{
		{"", ""},
		{"  config: null\n", ""},
		{"  config: {}\n", "e.yaml (MachineConfig 10-k) spec.config: invalid Ignition config: ignition.version is missing"},
	} {
		cfg, err := machineconfig.Decode(context.Background(), "e.yaml", []byte(head+c.config), machineconfig.Options{})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err = %v, want %q", c.config, err, c.err)
			}
			continue
		}
		if err != nil || len(cfg.KernelArgs) != 1 {
			t.Errorf("%q: %v %+v", c.config, err, cfg)
		}
	}
}
