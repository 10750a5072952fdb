package machineconfig_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/sources/machineconfig"
	"github.com/oslayer/oslayer/sources/model"
	"github.com/oslayer/oslayer/test/fixtures"
)

// rawPool is an independent view of the items of one or more MachineConfigs,
// read generically from the YAML and merged by key (later wins).
type rawPool struct {
	paths   map[string]string          // path -> "file", "dir", "link", "append"
	units   map[string]map[string]bool // unit -> drop-in names
	runtime map[string]bool            // runtime items
	kargs   []string
}

func newRaw() *rawPool {
	return &rawPool{paths: map[string]string{}, units: map[string]map[string]bool{}, runtime: map[string]bool{}}
}

func list(m any, keys ...string) []any {
	for i, k := range keys {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[k]
		if i == len(keys)-1 {
			l, _ := m.([]any)
			return l
		}
	}
	return nil
}

func str(m any, k string) string {
	mm, _ := m.(map[string]any)
	s, _ := mm[k].(string)
	return s
}

// add adds one MachineConfig object (generic) to the pool view.
func (r *rawPool) add(mc map[string]any) {
	spec := mc["spec"].(map[string]any)
	cfg := spec["config"]
	for _, f := range list(cfg, "storage", "files") {
		kind := "file"
		switch {
		case len(list(f, "append")) > 0:
			kind = "append"
		case str(f, "path") == "/var/lib/kubelet/config.json" || str(f, "path") == "/etc/kubernetes/kubeconfig":
			// The pull secret and the bootstrap kubeconfig: the
			// platform delivers them (credentials.go).
			kind = "credential"
		}
		r.paths[str(f, "path")] = kind
	}
	for _, d := range list(cfg, "storage", "directories") {
		r.paths[str(d, "path")] = "dir"
	}
	for _, l := range list(cfg, "storage", "links") {
		r.paths[str(l, "path")] = "link"
	}
	for _, u := range list(cfg, "systemd", "units") {
		n := str(u, "name")
		if r.units[n] == nil {
			r.units[n] = map[string]bool{}
		}
		for _, d := range list(u, "dropins") {
			r.units[n][str(d, "name")] = true
		}
	}
	for _, u := range list(cfg, "passwd", "users") {
		r.runtime["passwd.users["+str(u, "name")+"]"] = true
	}
	for _, g := range list(cfg, "passwd", "groups") {
		r.runtime["passwd.groups["+str(g, "name")+"]"] = true
	}
	for _, d := range list(cfg, "storage", "disks") {
		r.runtime["storage.disks["+str(d, "device")+"]"] = true
	}
	for _, d := range list(cfg, "storage", "raid") {
		r.runtime["storage.raid["+str(d, "name")+"]"] = true
	}
	for _, d := range list(cfg, "storage", "filesystems") {
		r.runtime["storage.filesystems["+str(d, "device")+"]"] = true
	}
	if f, _ := spec["fips"].(bool); f {
		r.runtime["spec.fips"] = true
	}
	if len(list(cfg, "kernelArguments", "shouldExist"))+len(list(cfg, "kernelArguments", "shouldNotExist")) > 0 {
		r.runtime["kernelArguments"] = true
	}
	for _, k := range list(mc, "spec", "kernelArguments") {
		r.kargs = append(r.kargs, k.(string))
	}
}

func (r *rawPool) addFile(t *testing.T, p, pool string) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range model.SplitDocuments(data) {
		var m map[string]any
		if err := yaml.Unmarshal(d, &m); err != nil {
			t.Fatal(err)
		}
		if m["kind"] != "MachineConfig" {
			continue
		}
		labels, _ := m["metadata"].(map[string]any)["labels"].(map[string]any)
		if pool != "" && labels["machineconfiguration.openshift.io/role"] != pool {
			continue
		}
		r.add(m)
	}
}

// check asserts that cfg holds exactly the raw items, baked or runtime.
func (r *rawPool) check(t *testing.T, cfg *model.Config) {
	t.Helper()
	got := map[string]string{}
	for _, f := range cfg.Files {
		got[f.Path] = "file"
		if f.Origin.Kind != machineconfig.Kind || !strings.HasPrefix(f.Origin.Field, "spec.config.storage.files[") || f.Origin.Name == "" {
			t.Errorf("file %s: origin %+v", f.Path, f.Origin)
		}
	}
	for _, d := range cfg.Dirs {
		got[d.Path] = "dir"
	}
	for _, l := range cfg.Links {
		got[l.Path] = "link"
	}
	rt := map[string]bool{}
	for _, x := range cfg.Runtime {
		if strings.HasPrefix(x.Item, "/") {
			got[x.Item] = "append"
			if x.Reason == machineconfig.ReasonCredential {
				got[x.Item] = "credential"
				if len(x.SHA256) != 64 {
					t.Errorf("runtime credential %s: sha256 %q", x.Item, x.SHA256)
				}
			} else if x.Reason != machineconfig.ReasonAppend {
				t.Errorf("runtime %s: reason %q", x.Item, x.Reason)
			}
			continue
		}
		rt[x.Item] = true
	}
	if fmt.Sprint(got) != fmt.Sprint(r.paths) {
		t.Errorf("paths:\n got %v\nwant %v", got, r.paths)
	}
	if fmt.Sprint(rt) != fmt.Sprint(r.runtime) {
		t.Errorf("runtime:\n got %v\nwant %v", rt, r.runtime)
	}
	units := map[string]map[string]bool{}
	for _, u := range cfg.Units {
		units[u.Name] = map[string]bool{}
		for _, d := range u.DropIns {
			units[u.Name][d.Name] = true
		}
	}
	if fmt.Sprint(units) != fmt.Sprint(r.units) {
		t.Errorf("units:\n got %v\nwant %v", units, r.units)
	}
	if fmt.Sprint(cfg.KernelArgs) != fmt.Sprint(r.kargs) && !(len(cfg.KernelArgs) == 0 && len(r.kargs) == 0) {
		t.Errorf("kernel args %v, want %v", cfg.KernelArgs, r.kargs)
	}
}

var platforms = []string{"aws", "baremetal", "gcp"}
var roles = []string{"master", "worker"}

// TestSingleFixtures decodes every MachineConfig file of the per-role sets
// and the rendered ones on its own.
func TestSingleFixtures(t *testing.T) {
	ctx := context.Background()
	n := 0
	for _, p := range platforms {
		files, _ := filepath.Glob(fixtures.Path(t, "mco", p, "*", "*.yaml"))
		rendered, _ := filepath.Glob(fixtures.Path(t, "mco", p, "rendered-*.yaml"))
		for _, f := range append(files, rendered...) {
			n++
			t.Run(strings.TrimPrefix(f, fixtures.Dir(t)), func(t *testing.T) {
				cfg, err := machineconfig.Load(ctx, []string{f}, machineconfig.Options{})
				if err != nil {
					t.Fatal(err)
				}
				raw := newRaw()
				raw.addFile(t, f, "")
				raw.check(t, cfg)
				if len(cfg.Inputs) != 1 || cfg.Inputs[0].Path != f || cfg.Inputs[0].Kind != machineconfig.Kind {
					t.Errorf("inputs %+v", cfg.Inputs)
				}
			})
		}
	}
	if n != 3*(6+2) {
		t.Errorf("found %d MachineConfig fixtures, want 24", n)
	}
}

// TestRoleSetsMatchRendered merges each per-role set (plus the 99-ROLE-ssh
// MachineConfig, as the generator did) and compares with the MCO's own
// rendered MachineConfig: same paths, modes, owners, content and units.
func TestRoleSetsMatchRendered(t *testing.T) {
	ctx := context.Background()
	for _, p := range platforms {
		for _, role := range roles {
			t.Run(p+"/"+role, func(t *testing.T) {
				ssh := fixtures.Path(t, "mco", "misc", "99_openshift-machineconfig_"+role+".yaml")
				// The platform directory holds both roles and the rendered
				// configs: the pool selects.
				set, err := machineconfig.Load(ctx, []string{fixtures.Path(t, "mco", p, role), ssh}, machineconfig.Options{Pool: role})
				if err != nil {
					t.Fatal(err)
				}
				raw := newRaw()
				files, _ := filepath.Glob(fixtures.Path(t, "mco", p, role, "*.yaml"))
				sort.Strings(files) // names sort like the files here
				for _, f := range append(files, ssh) {
					raw.addFile(t, f, role)
				}
				raw.check(t, set)
				if len(set.Inputs) != 4 {
					t.Errorf("inputs %+v", set.Inputs)
				}
				rendered, err := machineconfig.Load(ctx, []string{fixtures.Path(t, "mco", p, "rendered-"+role+".yaml")}, machineconfig.Options{Pool: role})
				if err != nil {
					t.Fatal(err)
				}
				if a, b := summary(set), summary(rendered); a != b {
					t.Errorf("merged set differs from rendered-%s:\n%s\n---\n%s", role, a, b)
				}
				// Whole-platform directory with the pool gives the same.
				all, err := machineconfig.Load(ctx, []string{fixtures.Path(t, "mco", p), ssh}, machineconfig.Options{Pool: role})
				if err != nil {
					t.Fatal(err)
				}
				if a, b := summary(set), summary(all); a != b {
					t.Errorf("platform dir with pool differs from the role set")
				}
			})
		}
	}
}

func summary(c *model.Config) string {
	var lines []string
	for _, f := range c.Files {
		lines = append(lines, fmt.Sprintf("F %s %04o %d:%d %x", f.Path, f.Mode, f.UID, f.GID, f.Data))
	}
	for _, d := range c.Dirs {
		lines = append(lines, fmt.Sprintf("D %s %04o %d:%d", d.Path, d.Mode, d.UID, d.GID))
	}
	for _, l := range c.Links {
		lines = append(lines, fmt.Sprintf("L %s -> %s %t", l.Path, l.Target, l.Hard))
	}
	for _, u := range c.Units {
		s := fmt.Sprintf("U %s mask=%t enabled=%v", u.Name, u.Mask, u.Enabled != nil && *u.Enabled)
		if u.Enabled == nil {
			s += "(unset)"
		}
		if u.Contents != nil {
			s += fmt.Sprintf(" %q", *u.Contents)
		}
		for _, d := range u.DropIns {
			s += fmt.Sprintf(" [%s %q]", d.Name, d.Contents)
		}
		lines = append(lines, s)
	}
	for _, r := range c.Runtime {
		lines = append(lines, "R "+r.Item)
	}
	lines = append(lines, fmt.Sprintf("K %v E %v T %q O %q", c.KernelArgs, c.Extensions, c.KernelType, c.OSImageURL))
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestKnownContent pins a few items of the aws worker pool: the 14 scripts
// under /usr/local, modes and an enabled unit.
func TestKnownContent(t *testing.T) {
	cfg, err := machineconfig.Load(context.Background(), []string{fixtures.Path(t, "mco", "aws", "rendered-worker.yaml")}, machineconfig.Options{Pool: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	usrLocal := 0
	for _, f := range cfg.Files {
		if strings.HasPrefix(f.Path, "/usr/local/") {
			usrLocal++
		}
		if f.Path == "/etc/kubernetes/cloud.conf" && (len(f.Data) != 0 || f.Mode != 0o644) {
			t.Errorf("cloud.conf = %+v", f)
		}
	}
	// 10 in the aws worker pool (11 for masters; the platforms differ).
	if usrLocal != 10 {
		t.Errorf("%d files under /usr/local, want 10", usrLocal)
	}
	var kubelet *model.Unit
	for i := range cfg.Units {
		if cfg.Units[i].Name == "kubelet.service" {
			kubelet = &cfg.Units[i]
		}
	}
	if kubelet == nil || kubelet.Enabled == nil || !*kubelet.Enabled || kubelet.Contents == nil {
		t.Errorf("kubelet.service = %+v", kubelet)
	}
	// The pull secret (files[26]) is delivered by the platform, the
	// core user's SSH keys live on the node.
	if r := cfg.Runtime; len(r) != 2 || r[0].Item != "/var/lib/kubelet/config.json" || r[0].Reason != machineconfig.ReasonCredential ||
		r[0].Origin.Field != "spec.config.storage.files[26]" ||
		r[1].Item != "passwd.users[core]" || r[1].Reason != machineconfig.ReasonPasswd || r[1].Origin.Field != "spec.config.passwd.users[0]" {
		t.Errorf("runtime = %+v", r)
	}
}

// misc lists mco/misc: what decodes, and why the rest is not an input.
var misc = []struct{ name, err, why string }{
	{"99_openshift-machineconfig_master.yaml", "", ""},
	{"99_openshift-machineconfig_worker.yaml", "", ""},
	{"bootstrap-controllerconfig.yaml", `no MachineConfig found in the inputs (` + "%s" + `: ignored: kind "ControllerConfig"`, "a ControllerConfig"},
	{"compressed_and_encoded_ign_config.json.gz", "not a YAML/JSON object", "base64 of a gzip Ignition config, not a MachineConfig"},
	{"compressed_ign_config.json.gz", "not valid YAML/JSON", "gzip Ignition config, not a MachineConfig"},
	{"ign_config.json", `ignored: kind ""`, "a bare Ignition config, not a MachineConfig"},
	{"devex-sanitize/input-machineconfig.yaml", "(MachineConfig test-machine-config) spec.config: invalid Ignition config: ignition.version is missing", "sanitizer test input, not valid Ignition"},
	{"server-test-config.yaml", "", ""},
}

func TestMiscFixtures(t *testing.T) {
	ctx := context.Background()
	for _, m := range misc {
		t.Run(m.name, func(t *testing.T) {
			p := fixtures.Path(t, "mco", "misc", m.name)
			cfg, err := machineconfig.Load(ctx, []string{p}, machineconfig.Options{})
			if m.err != "" {
				want := m.err
				if strings.Contains(want, "%s") {
					want = fmt.Sprintf(want, p)
				}
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("skipped as %s: want error containing %q, got %v", m.why, want, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			raw := newRaw()
			raw.addFile(t, p, "")
			raw.check(t, cfg)
		})
	}
}

// templateParams are values for the ${PARAM} placeholders of the
// extended-priv OpenShift Templates, so their MachineConfigs can be decoded.
var templateParams = map[string]string{
	"NAME": "test-mc", "POOL": "worker", "FIPS": "true", "FILE_PATH": "/etc/test-file",
	"FILE_CONTENT": "hello%20world", "DEVICE1": "/dev/vdb", "DEVICE2": "/dev/vdc",
	"IGNITION_VERSION": "3.4.0", "CONFIGURATION": base64.StdEncoding.EncodeToString([]byte("[Journal]\nStorage=persistent\n")),
	"KERNELTYPE": "realtime", "OS_IMAGE": "quay.io/example/os@sha256:0000000000000000000000000000000000000000000000000000000000000000",
}

// instantiate substitutes a Template's parameters (values from
// templateParams, else the template's defaults) and returns its objects as a
// List document.
func instantiate(t *testing.T, data []byte) []byte {
	t.Helper()
	var tmpl struct {
		Parameters []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"parameters"`
	}
	if err := yaml.Unmarshal(data, &tmpl); err != nil {
		t.Fatal(err)
	}
	vals := map[string]string{}
	for _, p := range tmpl.Parameters {
		vals[p.Name] = strings.TrimSpace(p.Value)
		if v, ok := templateParams[p.Name]; ok {
			vals[p.Name] = v
		}
	}
	s := regexp.MustCompile(`\$\{\{([A-Z_0-9]+)\}\}|\$\{([A-Z_0-9]+)\}`).ReplaceAllStringFunc(string(data), func(m string) string {
		name := strings.Trim(m, "${}")
		v, ok := vals[name]
		if !ok {
			t.Fatalf("template parameter %s has no value", name)
		}
		return v
	})
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(s), &obj); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": obj["objects"]})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestExtendedPrivTemplates(t *testing.T) {
	files, _ := filepath.Glob(fixtures.Path(t, "mco", "misc", "extended-priv-templates", "*.y*ml"))
	if len(files) != 24 {
		t.Errorf("%d templates, want 24", len(files))
	}
	ctx := context.Background()
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			// As given, a Template is not a MachineConfig.
			if _, err := machineconfig.Load(ctx, []string{f}, machineconfig.Options{}); err == nil || !strings.Contains(err.Error(), `ignored: kind "Template"`) {
				t.Errorf("template as input: %v", err)
			}
			doc := instantiate(t, data)
			// Some templates hard-code their pool: select all.
			cfg, err := machineconfig.Decode(ctx, "instance.yaml", doc, machineconfig.Options{})
			if err != nil {
				t.Fatal(err)
			}
			raw := newRaw()
			var list struct {
				Items []map[string]any `json:"items"`
			}
			if err := yaml.Unmarshal(doc, &list); err != nil {
				t.Fatal(err)
			}
			sort.SliceStable(list.Items, func(i, j int) bool {
				return list.Items[i]["metadata"].(map[string]any)["name"].(string) < list.Items[j]["metadata"].(map[string]any)["name"].(string)
			})
			for _, it := range list.Items {
				raw.add(it)
			}
			raw.check(t, cfg)
		})
	}
}

func TestTemplateSemantics(t *testing.T) {
	ctx := context.Background()
	load := func(name string) *model.Config {
		t.Helper()
		data, err := os.ReadFile(fixtures.Path(t, "mco", "misc", "extended-priv-templates", name))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := machineconfig.Decode(ctx, name, instantiate(t, data), machineconfig.Options{Pool: "worker"})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	c := load("change-worker-karg-ktype-extension.yaml")
	if fmt.Sprintf("%v %v %s", c.KernelArgs, c.Extensions, c.KernelType) != "[z=10] [usbguard] realtime" {
		t.Errorf("kargs/extensions/kernelType = %v %v %q", c.KernelArgs, c.Extensions, c.KernelType)
	}
	c = load("change-fips.yaml")
	if len(c.Runtime) != 1 || c.Runtime[0].Item != "spec.fips" || c.Runtime[0].Reason != machineconfig.ReasonFIPS {
		t.Errorf("fips runtime = %+v", c.Runtime)
	}
	c = load("extra-disks-with-files.yaml")
	if len(c.Files) != 1 || string(c.Files[0].Data) != "hello world" || c.Files[0].Path != "/etc/test-file" {
		t.Errorf("files = %+v", c.Files)
	}
	c = load("change-worker-jrnl-configuration.yaml")
	if len(c.Files) != 1 || string(c.Files[0].Data) != "[Journal]\nStorage=persistent\n" {
		t.Errorf("base64 data URL with media type: %+v", c.Files)
	}
	// Unused keys (Ignition 2.x "filesystem") are Ignition warnings, kept.
	if len(c.Warnings) != 2 || !strings.HasPrefix(c.Warnings[0], "change-worker-jrnl-configuration.yaml (MachineConfig test-mc) spec.config: Ignition: warning at $.networkd") ||
		!strings.Contains(c.Warnings[1], "warning at $.storage.files.0.filesystem, line 1 col 248: unused key filesystem") {
		t.Errorf("warnings = %q", c.Warnings)
	}
	c = load("set-64k-pages-kernel.yaml")
	if c.KernelType != "64k-pages" {
		t.Errorf("kernelType %q", c.KernelType)
	}
}

const mcHead = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-bad
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
`

func fileMC(file string) string {
	return mcHead + "    storage:\n      files:\n      - " + file + "\n"
}

func gz(t *testing.T, b []byte) string {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func TestHostileInputs(t *testing.T) {
	bomb := gz(t, make([]byte, model.MaxContentSize+1))
	const o = `bad.yaml (MachineConfig 50-bad) spec.config.storage.files[0]: `
	cases := []struct{ name, doc, want string }{
		{"remote https", fileMC(`{path: /etc/x, contents: {source: "https://example.com/x"}}`), o + `/etc/x: contents: remote source URL "https://example.com/x": an image can only bake inline data: URLs`},
		{"remote s3", fileMC(`{path: /etc/x, contents: {source: "s3://bucket/x"}}`), o + `/etc/x: contents: remote source URL "s3://bucket/x"`},
		{"invalid base64 data URL", fileMC(`{path: /etc/x, contents: {source: "data:;base64,!!!!"}}`), `bad.yaml (MachineConfig 50-bad) spec.config: invalid Ignition config: config is not valid: error at $.storage.files.0.contents.source, line 1 col 75: invalid data character`},
		{"invalid percent escape", fileMC(`{path: /etc/x, contents: {source: "data:,%zz"}}`), `spec.config: invalid Ignition config: config is not valid: error at $.storage.files.0.contents.source, line 1 col 75: rfc2396: invalid char 0x25 in unescape sequence`},
		{"data URL without comma", fileMC(`{path: /etc/x, contents: {source: "data:text/plain"}}`), `error at $.storage.files.0.contents.source, line 1 col 75: incomplete media type`},
		{"gzip bomb", fileMC(`{path: /etc/x, contents: {compression: gzip, source: "data:;base64,` + bomb + `"}}`), o + `/etc/x: contents: gzip content exceeds the limit of 67108864 bytes`},
		{"hash mismatch", fileMC(`{path: /etc/x, contents: {source: "data:,hello", verification: {hash: "sha256-0000000000000000000000000000000000000000000000000000000000000000"}}}`), o + `/etc/x: contents: verification.hash mismatch: content has sha256-2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824, want sha256-0000`},
		{"not gzip", fileMC(`{path: /etc/x, contents: {compression: gzip, source: "data:,plain"}}`), o + `/etc/x: contents: compression gzip: unexpected EOF`},
		{"user name", fileMC(`{path: /etc/x, user: {name: bob}}`), o + `/etc/x: user.name "bob": no base image tree to resolve it through (build with base); give a numeric id`},
		{"group name", fileMC(`{path: /etc/x, group: {name: wheel}}`), o + `/etc/x: group.name "wheel": no base image tree to resolve it through (build with base); give a numeric id`},
		{"relative path", fileMC(`{path: etc/x}`), `bad.yaml (MachineConfig 50-bad) spec.config: invalid Ignition config: config is not valid: error at $.storage.files.0.path, line 1 col 61: path not absolute`},
		{"dotdot path", fileMC(`{path: /etc/../x}`), `spec.config: invalid Ignition config`},
		{"unsupported ignition", strings.Replace(mcHead, "3.4.0", "2.3.0", 1), `bad.yaml (MachineConfig 50-bad) spec.config: unsupported Ignition version: spec 2.x configs must be 2.0, 2.1 or 2.2`},
		{"ignition 3.6", strings.Replace(mcHead, "3.4.0", "3.6.0-experimental", 1), `bad.yaml (MachineConfig 50-bad) spec.config: unsupported Ignition version 3.6.0-experimental`},
		{"unknown MC field", mcHead + "  bogus: 1\n", `bad.yaml: MachineConfig: unknown field "spec.bogus"`},
		{"invalid unit name", mcHead + "    systemd:\n      units:\n      - {name: foo, contents: x}\n", `bad.yaml (MachineConfig 50-bad) spec.config: invalid Ignition config: config is not valid: error at $.systemd.units.0.name, line 1 col 76: invalid systemd unit extension`},
		{"drop-in for invalid unit", mcHead + "    systemd:\n      units:\n      - name: \"a b.service\"\n        dropins: [{name: x.conf, contents: \"y\"}]\n", `spec.config.systemd.units[0]: drop-ins for unit "a b.service": invalid unit name`},
		{"no name", "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nspec: {}\n", `bad.yaml: MachineConfig without metadata.name`},
		{"mode bits", fileMC(`{path: /etc/x, mode: 65535}`), `spec.config: invalid Ignition config: config is not valid: error at $.storage.files.0.mode, line 1 col 61: illegal file mode`},
		{"merge remote config", strings.Replace(mcHead, "      version: 3.4.0\n", "      version: 3.4.0\n      config: {merge: [{source: \"https://example.com/c.ign\"}]}\n", 1), `spec.config.ignition.config: ignition.config merge/replace fetches other configs`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := machineconfig.Decode(context.Background(), "bad.yaml", []byte(c.doc), machineconfig.Options{})
			if err == nil {
				t.Fatalf("no error; config %+v", cfg)
			}
			if cfg != nil {
				t.Error("config returned with an error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error\n  %v\nwant substring\n  %s", err, c.want)
			}
		})
	}
}

func TestItems(t *testing.T) {
	doc := mcHead + `    storage:
      files:
      - {path: /etc/empty}
      - {path: /etc/emptysrc, contents: {source: ""}}
      - {path: /etc/b64, mode: 384, user: {id: 1000}, group: {name: root}, overwrite: false, contents: {source: "data:text/plain;charset=utf-8;base64,aGVsbG8="}}
      - {path: /etc/gz, contents: {compression: gzip, source: "data:;base64,` + gz(t, []byte("zipped")) + `", verification: {hash: "sha256-` + fmt.Sprintf("%x", sha256.Sum256([]byte("zipped"))) + `"}}}
      - {path: /etc/app, append: [{source: "data:,more"}]}
      directories:
      - {path: /var/lib/d}
      - {path: /etc/d2, mode: 448}
      links:
      - {path: /etc/l, target: /usr/share/x}
      - {path: /etc/h, target: /etc/b64, hard: true}
    systemd:
      units:
      - {name: a.service, contents: "[Unit]", enabled: true}
      - {name: b.service, mask: true}
      - {name: c@.service, dropins: [{name: 10-x.conf, contents: "[Service]"}]}
    passwd:
      users:
      - {name: core, sshAuthorizedKeys: [ssh-ed25519 AAA]}
  kernelArguments: [a=1, a=1, b]
  extensions: [usbguard, usbguard, kerberos]
  kernelType: default
  osImageURL: quay.io/x/y@sha256:0000000000000000000000000000000000000000000000000000000000000000
  fips: true
`
	cfg, err := machineconfig.Decode(context.Background(), "ok.yaml", []byte(doc), machineconfig.Options{Pool: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	want := `D /etc/d2 0700 0:0
D /var/lib/d 0755 0:0
F /etc/b64 0600 1000:0 68656c6c6f
F /etc/empty 0644 0:0 
F /etc/emptysrc 0644 0:0 
F /etc/gz 0644 0:0 7a6970706564
K [a=1 a=1 b] E [usbguard kerberos] T "" O "quay.io/x/y@sha256:0000000000000000000000000000000000000000000000000000000000000000"
L /etc/h -> /etc/b64 true
L /etc/l -> /usr/share/x false
R /etc/app
R passwd.users[core]
R spec.fips
U a.service mask=false enabled=true "[Unit]"
U b.service mask=true enabled=false(unset)
U c@.service mask=false enabled=false(unset) [10-x.conf "[Service]"]`
	if got := summary(cfg); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	for _, f := range cfg.Files {
		if f.Path == "/etc/gz" && f.Origin.String() != "ok.yaml (MachineConfig 50-bad) spec.config.storage.files[3]" {
			t.Errorf("origin %s", f.Origin)
		}
	}
}

// TestMergeOrder: later MachineConfigs (by name, not by file order) win per
// path and unit; kernel arguments accumulate in name order.
func TestMergeOrder(t *testing.T) {
	mk := func(name, data, karg string) string {
		return strings.Replace(mcHead, "50-bad", name, 1) + `    storage:
      files:
      - {path: /etc/x, contents: {source: "data:,` + data + `"}}
    systemd:
      units:
      - {name: u.service, contents: "` + data + `", dropins: [{name: ` + name + `.conf, contents: x}]}
  kernelArguments: [` + karg + `]
`
	}
	stream := mk("99-z", "last", "z") + "---\n" + mk("10-a", "first", "a") + "---\n" + mk("50-m", "middle", "m")
	cfg, err := machineconfig.Decode(context.Background(), "multi.yaml", []byte(stream), machineconfig.Options{Pool: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Files) != 1 || string(cfg.Files[0].Data) != "last" || cfg.Files[0].Origin.Name != "99-z" || cfg.Files[0].Origin.Document != "multi.yaml" {
		t.Errorf("file = %+v", cfg.Files)
	}
	u := cfg.Units[0]
	if *u.Contents != "last" || len(u.DropIns) != 3 || u.Origin.Name != "99-z" {
		t.Errorf("unit = %+v", u)
	}
	if fmt.Sprint(cfg.KernelArgs) != "[a m z]" {
		t.Errorf("kargs %v", cfg.KernelArgs)
	}
	if len(cfg.Inputs) != 3 || cfg.Inputs[0].Name != "10-a" {
		t.Errorf("inputs %+v", cfg.Inputs)
	}
	// Pool selection: none labelled "infra".
	_, err = machineconfig.Decode(context.Background(), "multi.yaml", []byte(stream), machineconfig.Options{Pool: "infra"})
	if err == nil || !strings.Contains(err.Error(), "no MachineConfig labelled machineconfiguration.openshift.io/role=infra among 3 MachineConfig(s)") {
		t.Errorf("pool: %v", err)
	}
	// Same name twice with different content.
	_, err = machineconfig.Decode(context.Background(), "dup.yaml", []byte(mk("10-a", "one", "a")+"---\n"+mk("10-a", "two", "a")), machineconfig.Options{})
	if err == nil || !strings.Contains(err.Error(), "MachineConfig 10-a is defined twice with different content: dup.yaml and dup.yaml (document 2)") {
		t.Errorf("duplicate: %v", err)
	}
}

func TestListAndWarnings(t *testing.T) {
	doc := `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: cm}
- ` + strings.ReplaceAll(strings.TrimSuffix(mcHead, "\n"), "\n", "\n  ") + `
`
	cfg, err := machineconfig.Decode(context.Background(), "list.yaml", []byte(doc), machineconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], `list.yaml items[0]: ignored: kind "ConfigMap"`) || len(cfg.Inputs) != 1 {
		t.Errorf("warnings %v inputs %v", cfg.Warnings, cfg.Inputs)
	}
}

func TestNULAndUTF8Paths(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{`{path: "/etc/a\0b"}`, `spec.config.storage.files[0]: path "/etc/a\x00b" contains a NUL byte`},
		{`{path: "/etc/../x"}`, `spec.config: invalid Ignition config`},
		{`{path: /etc/x, contents: {source: "data:,a"}}` + "\n      links:\n      - {path: /etc/l, target: \"/a\\0b\"}", `spec.config.storage.links[0]: /etc/l: link target "/a\x00b": not valid UTF-8 or contains NUL`},
	} {
		_, err := machineconfig.Decode(context.Background(), "bad.yaml", []byte(fileMC(c.file)), machineconfig.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.file, err, c.want)
		}
	}
}

// BenchmarkLoadRendered measures decoding the largest MachineConfig fixture.
func BenchmarkLoadRendered(b *testing.B) {
	p := fixtures.Path(b, "mco", "baremetal", "rendered-master.yaml")
	ctx := context.Background()
	for b.Loop() {
		if _, err := machineconfig.Load(ctx, []string{p}, machineconfig.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDirectoryWalk: a directory is walked recursively in lexical order;
// only *.yaml, *.yml and *.json files are read.
func TestDirectoryWalk(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, s string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(name string) string { return strings.Replace(mcHead, "50-bad", name, 1) }
	write("README.md", "not yaml: [")
	write("a/10.yml", mk("10-a"))
	j, err := yaml.YAMLToJSON([]byte(mk("20-b")))
	if err != nil {
		t.Fatal(err)
	}
	write("b/c/20.json", string(j))
	write("z.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	write("notes.txt", "ignored")
	cfg, err := machineconfig.Load(context.Background(), []string{dir}, machineconfig.Options{Pool: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range cfg.Inputs {
		rel, _ := filepath.Rel(dir, in.Path)
		got = append(got, rel+":"+in.Name)
	}
	if strings.Join(got, ",") != "a/10.yml:10-a,b/c/20.json:20-b" {
		t.Errorf("inputs %v", got)
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], `z.yaml: ignored: kind "ConfigMap"`) {
		t.Errorf("warnings %v", cfg.Warnings)
	}
}

// MachineConfigs of several roles without a pool are refused: the MCO
// renders each pool on its own; one role, or a pool, is fine.
func TestSeveralRolesNeedAPool(t *testing.T) {
	ctx := context.Background()
	dir := fixtures.Path(t, "mco", "aws")
	_, err := machineconfig.Load(ctx, []string{filepath.Join(dir, "master"), filepath.Join(dir, "worker")}, machineconfig.Options{})
	if err == nil || !strings.Contains(err.Error(), "2 roles (master, worker") || !strings.Contains(err.Error(), "give pool to say") {
		t.Errorf("master and worker without a pool: %v", err)
	}
	for _, c := range []struct {
		paths []string
		pool  string
	}{
		{[]string{filepath.Join(dir, "worker")}, ""},
		{[]string{filepath.Join(dir, "master"), filepath.Join(dir, "worker")}, "worker"},
	} {
		if _, err := machineconfig.Load(ctx, c.paths, machineconfig.Options{Pool: c.pool}); err != nil {
			t.Errorf("%v pool %q: %v", c.paths, c.pool, err)
		}
	}
}

// TestTypeErrorNamesDocumentAndItem: a value of the wrong type, in the
// MachineConfig or in its Ignition config, names the document, the
// MachineConfig and the field with its item index.
func TestTypeErrorNamesDocumentAndItem(t *testing.T) {
	mc := `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-worker-bad
  labels: {machineconfiguration.openshift.io/role: worker}
spec:
  %s
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
      - {path: /etc/a, mode: 420}
      - {path: /etc/b, mode: %s}
`
	for _, tc := range []struct{ spec, mode, want string }{
		{`fips: "yes"`, `420`, `bad.yaml (MachineConfig 50-worker-bad) spec.fips: got a string ("yes"), want true or false`},
		{`kernelArguments: [a, 1]`, `420`, `bad.yaml (MachineConfig 50-worker-bad) spec.kernelArguments[1]: got a number (1), want a string`},
		{`fips: false`, `"rwx"`, `bad.yaml (MachineConfig 50-worker-bad) spec.config.storage.files[1].mode: invalid Ignition config: got a string ("rwx"), want a number (int)`},
	} {
		_, err := machineconfig.Decode(context.Background(), "bad.yaml", []byte(fmt.Sprintf(mc, tc.spec, tc.mode)), machineconfig.Options{Pool: "worker"})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s, mode %s:\n got %v\nwant %s", tc.spec, tc.mode, err, tc.want)
		}
	}
}
