package ignition

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/test/fixtures"
)

// input is one file of a case: a MachineConfig, or an OpenShift Template
// of MachineConfigs processed with params the way `oc process -p` does.
type input struct {
	path   string // fixtures-relative ("fixtures:...") or testdata-relative
	params map[string]string
	// role labels a MachineConfig that has no role label (documentation
	// examples leave it out).
	role string
}

// mcCase is one MachineConfig set, rendered for pool. Without mcp, the
// pool selects the configs labelled with its role, as the MCO's worker and
// master pools do; with mcp, a MachineConfigPool (file or Template) named
// pool selects them with its machineConfigSelector.
type mcCase struct {
	name   string
	pool   string
	inputs []input
	mcp    *input
	// oracle lists file contents the oracle's node must have (a check of
	// the oracle itself).
	oracle map[string]string
}

func fx(p string) input { return input{path: "fixtures:" + p} }
func td(p string) input { return input{path: p} }
func tmpl(p string, params map[string]string) input {
	return input{path: "fixtures:" + p, params: params}
}
func unlabelled(p, role string) input           { return input{path: p, role: role} }
func set(name, pool string, in ...input) mcCase { return mcCase{name: name, pool: pool, inputs: in} }
func generic(name string, params map[string]string) input {
	params["NAME"] = name
	return tmpl("mco/misc/extended-priv-templates/generic-machine-config-template.yml", params)
}

// gzipSource is the data URL the MCO e2e tests build for a gzip file
// (getGzipFileJSONConfig): Go's gzip at the default level, base64.
func gzipSource(content string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(content))
	zw.Close()
	return "data:;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
}

// cases lists every MachineConfig set: the fixtures (MCO templates for three
// platforms and both roles, the rendered configs, bootstrap and server test
// data, the MCO e2e templates) and the real-world configs in testdata/mc
// (see testdata/mc/SOURCES.md).
func cases(t *testing.T) []mcCase {
	var cs []mcCase
	for _, p := range []string{"aws", "baremetal", "gcp"} {
		for _, role := range []string{"worker", "master"} {
			cs = append(cs,
				set("templates-"+p+"-"+role, role, fx("mco/"+p+"/"+role), fx("mco/misc/99_openshift-machineconfig_"+role+".yaml")),
				set("rendered-"+p+"-"+role, role, fx("mco/"+p+"/rendered-"+role+".yaml")))
		}
	}
	cs = append(cs,
		set("server-test-config-spec2", "worker", input{path: "fixtures:mco/misc/server-test-config.yaml", role: "worker"}),
		set("devex-sanitize-input", "worker", input{path: "fixtures:mco/misc/devex-sanitize/input-machineconfig.yaml", role: "worker"}),
	)
	const e2e = "mco/misc/extended-priv-templates/"
	for _, c := range []struct {
		name, file, pool string
		params           map[string]string
	}{
		{"e2e-add-gpg-pub-key", "add-gpg-pub-key.yaml", "worker", nil},
		{"e2e-add-ignition-kernel-arguments", "add-ignition-kernel-arguments.yaml", "worker", nil},
		{"e2e-add-mc-to-trigger-node-drain", "add-mc-to-trigger-node-drain.yaml", "worker", nil},
		{"e2e-bz1866117-add-dummy-files", "bz1866117-add-dummy-files.yaml", "worker", nil},
		{"e2e-bz2096496-dummy-mc-for-fips", "bz2096496-dummy-mc-for-fips.yaml", "worker", nil},
		{"e2e-change-fips", "change-fips.yaml", "worker", map[string]string{"FIPS": "true"}},
		{"e2e-change-policy-json", "change-policy-json.yaml", "worker", nil},
		{"e2e-change-worker-duplicated-kernel-argument", "change-worker-duplicated-kernel-argument.yaml", "worker", nil},
		{"e2e-change-worker-extension-usbguard", "change-worker-extension-usbguard.yaml", "worker", nil},
		{"e2e-change-worker-ign-version-empty", "change-worker-ign-version.yaml", "worker", map[string]string{"IGNITION_VERSION": ""}},
		{"e2e-change-worker-jrnl-configuration", "change-worker-jrnl-configuration.yaml", "worker", map[string]string{
			"CONFIGURATION": base64.StdEncoding.EncodeToString([]byte("# Disable rate limiting\nRateLimitInterval=1s\nRateLimitBurst=10000\nStorage=volatile\nCompress=no\nMaxRetentionSec=30s\n"))}},
		{"e2e-change-worker-karg-ktype-extension", "change-worker-karg-ktype-extension.yaml", "worker", nil},
		{"e2e-change-worker-kernel-selinux", "change-worker-kernel-selinux.yaml", "worker", nil},
		{"e2e-change-workers-chrony-configuration", "change-workers-chrony-configuration.yaml", "worker", nil},
		{"e2e-disable-chrony", "disable-chrony.yaml", "worker", nil},
		{"e2e-extra-disks-with-files", "extra-disks-with-files.yaml", "worker", map[string]string{
			"DEVICE1": "/dev/nvme1n1", "DEVICE2": "/dev/nvme2n1", "FILE_PATH": "/etc/temp_config.conf", "FILE_CONTENT": "THIS_IS_A_TEST_FILE_CONF"}},
		{"e2e-extra-disks", "extra-disks.yaml", "worker", map[string]string{"DEVICE1": "/dev/nvme1n1", "DEVICE2": "/dev/nvme2n1"}},
		{"e2e-infra-extension-mc", "machineconfigs-infra-extension-mc.yaml", "infra", nil},
		{"e2e-infra-testfile-mc", "machineconfigs-infra-testfile-mc.yaml", "infra", nil},
		{"e2e-master-extension-mc", "machineconfigs-master-extension-mc.yaml", "master", nil},
		{"e2e-master-testfile-mc", "machineconfigs-master-testfile-mc.yaml", "master", nil},
		{"e2e-set-64k-pages-kernel", "set-64k-pages-kernel.yaml", "worker", nil},
		{"e2e-set-realtime-kernel", "set-realtime-kernel.yaml", "worker", nil},
	} {
		params := map[string]string{"NAME": c.name, "POOL": c.pool}
		for k, v := range c.params {
			params[k] = v
		}
		cs = append(cs, set(c.name, c.pool, tmpl(e2e+c.file, params)))
	}
	// The generic template with the parameters the MCO e2e tests pass.
	cs = append(cs,
		set("e2e-drift-file", "worker", generic("mco-drift-test-file", map[string]string{"POOL": "worker",
			"FILES": `[{"contents": {"source": "data:,` + url.PathEscape("MCO test file\n") + `"}, "path": "/etc/mco-test-file"}]`})),
		set("e2e-drift-dropin", "worker", generic("drifted-dropins-test", map[string]string{"POOL": "worker",
			"UNITS": `[{"name": "chronyd.service", "enabled": true, "dropins": [{"name": "10-chrony-drop-test.conf", "contents": "[Service]\nEnvironment=\"FAKE_OPTS=fake-value\""}]}]`})),
		set("e2e-drift-new-unit", "worker", generic("drifted-new-service-test", map[string]string{"POOL": "worker",
			"UNITS": `[{"name": "example.service", "enabled": true, "contents": "[Service]\nType=oneshot\nExecStart=/usr/bin/echo Hello from MCO test service\n\n[Install]\nWantedBy=multi-user.target"}]`})),
		set("e2e-drift-gzip-file", "worker", generic("mco-drift-test-compressed", map[string]string{"POOL": "worker",
			"FILES": `[{"contents": {"compression": "gzip", "source": "` + gzipSource("MCO test file\nusing compression") + `"}, "path": "/etc/mco-compressed-test-file"}]`})),
		set("e2e-gzip-then-plain", "worker",
			generic("test-gzip-test-82976-1", map[string]string{"POOL": "worker",
				"FILES": `[{"contents": {"compression": "gzip", "source": "` + gzipSource("test-content-1") + `"}, "path": "/etc/test-file"}]`}),
			generic("test-gzip-test-82976-2", map[string]string{"POOL": "worker",
				"FILES": `[{"contents": {"source": "data:text/plain;charset=utf-8;base64,` + base64.StdEncoding.EncodeToString([]byte("test-content-2")) + `"}, "path": "/etc/test-file"}]`})),
		set("e2e-usbguard-enable", "worker", generic("enable-usbguard", map[string]string{"POOL": "worker",
			"UNITS": `[{"enabled": true, "name": "usbguard.service"}]`})),
		set("e2e-mask-chronyd", "worker", generic("99-test-mask-services", map[string]string{"POOL": "worker",
			"UNITS": `[{"name": "chronyd.service", "mask": true}]`})),
		set("e2e-mask-with-contents", "worker", generic("tc-56614-maks-and-contents", map[string]string{"POOL": "worker",
			"UNITS": `[{"name": "tc-56614-maks-and-contents.service", "mask": true, "contents": "[Unit]\nDescription=Just random content for test case 56614"}]`})),
	)
	// Pools as the MCO renders them: templates plus user configs.
	cs = append(cs,
		set("pool-aws-worker-disable-chrony", "worker", fx("mco/aws/worker"), fx("mco/misc/99_openshift-machineconfig_worker.yaml"),
			tmpl(e2e+"disable-chrony.yaml", map[string]string{"NAME": "99-disable-chrony", "POOL": "worker"})),
		set("pool-gcp-worker-chrony-configuration", "worker", fx("mco/gcp/worker"), fx("mco/misc/99_openshift-machineconfig_worker.yaml"),
			tmpl(e2e+"change-workers-chrony-configuration.yaml", map[string]string{"NAME": "99-chrony", "POOL": "worker"})),
		set("pool-baremetal-worker-ignition-support", "worker", fx("mco/baremetal/worker"), fx("mco/misc/99_openshift-machineconfig_worker.yaml"),
			td("testdata/mc/mco-ignition-support")),
	)
	// A custom pool from the MCO e2e template (role In [worker, infra]):
	// it inherits the worker configs, and its own configs override theirs
	// although they sort first (the MCO merges worker configs first).
	infra := &input{path: "fixtures:mco/pools/custom-machine-config-pool.yaml", params: map[string]string{"NAME": "infra"}}
	cs = append(cs,
		mcCase{name: "custom-pool-infra-aws", pool: "infra", mcp: infra, oracle: map[string]string{
			"/etc/chrony.conf": "pool infra.example.com iburst\n", "/var/home/core/test": "hello world\n", "/etc/infratest": "infra",
		}, inputs: []input{
			fx("mco/aws/worker"), fx("mco/misc/99_openshift-machineconfig_worker.yaml"),
			tmpl(e2e+"change-workers-chrony-configuration.yaml", map[string]string{"NAME": "99-worker-chrony", "POOL": "worker"}),
			generic("00-infra-chrony", map[string]string{"POOL": "infra",
				"FILES": `[{"contents": {"source": "data:,` + url.PathEscape("pool infra.example.com iburst\n") + `"}, "path": "/etc/chrony.conf", "mode": 420}]`}),
			fx("mco/misc/extended-priv-templates/machineconfigs-infra-testfile-mc.yaml"),
			td("testdata/mc/mco-docs/custom-pools-1.yaml"),
			fx("mco/misc/99_openshift-machineconfig_master.yaml"),
		}},
		mcCase{name: "custom-pool-infra-only-own", pool: "infra", mcp: infra, inputs: []input{
			fx("mco/misc/extended-priv-templates/machineconfigs-infra-testfile-mc.yaml"),
			td("testdata/mc/mco-docs/custom-pools-1.yaml"),
		}},
	)
	// Real-world configs collected in testdata/mc.
	ents, err := os.ReadDir("testdata/mc/mco-ignition-support")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		cs = append(cs, set("doc-"+strings.TrimSuffix(e.Name(), ".yaml"), "worker", td("testdata/mc/mco-ignition-support/"+e.Name())))
	}
	cs = append(cs,
		set("doc-machineconfig-root-file", "worker", unlabelled("testdata/mc/mco-docs/MachineConfig-1.yaml", "worker")),
		set("doc-machineconfig-root-file-spec2", "worker", unlabelled("testdata/mc/mco-docs/MachineConfig-2.yaml", "worker")),
		set("doc-machineconfig-master-kargs", "master", td("testdata/mc/mco-docs/MachineConfig-3.yaml")),
		set("doc-machineconfig-worker-kargs", "worker", td("testdata/mc/mco-docs/MachineConfig-4.yaml")),
		set("doc-update-sshkeys", "worker", td("testdata/mc/mco-docs/Update-SSHKeys-1.yaml")),
		set("doc-using-layering-osimageurl", "worker", td("testdata/mc/mco-docs/UsingLayering-1.yaml")),
		set("doc-custom-pool-infra", "infra", td("testdata/mc/mco-docs/custom-pools-1.yaml")),
	)
	return cs
}

// machineConfigPool returns the case's MachineConfigPool (nil without one).
func (c mcCase) machineConfigPool(t *testing.T) *mcfgv1.MachineConfigPool {
	t.Helper()
	if c.mcp == nil {
		return nil
	}
	for _, doc := range documents(t, c.mcpPath(t), c.mcp.params) {
		mcp := &mcfgv1.MachineConfigPool{}
		if err := yaml.Unmarshal(doc, mcp); err != nil {
			t.Fatal(err)
		}
		if mcp.Kind == "MachineConfigPool" && mcp.Name == c.pool {
			return mcp
		}
	}
	t.Fatalf("case %s: no MachineConfigPool %s", c.name, c.pool)
	return nil
}

func (c mcCase) mcpPath(t *testing.T) string {
	p := c.mcp.path
	if rel, ok := strings.CutPrefix(p, "fixtures:"); ok {
		p = fixtures.Path(t, strings.Split(rel, "/")...)
	}
	return p
}

// writePool writes the case's MachineConfigPool (a Template processed) to
// p and returns p.
func (c mcCase) writePool(t *testing.T, p string) string {
	t.Helper()
	b, err := yaml.Marshal(c.machineConfigPool(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// selects reports whether the case's pool selects mc: the role label, or
// the MachineConfigPool's machineConfigSelector as Kubernetes evaluates it.
func (c mcCase) selects(t *testing.T, mc *mcfgv1.MachineConfig) bool {
	t.Helper()
	mcp := c.machineConfigPool(t)
	if mcp == nil {
		return mc.Labels[roleLabel] == c.pool
	}
	sel, err := metav1.LabelSelectorAsSelector(mcp.Spec.MachineConfigSelector)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Matches(labels.Set(mc.Labels))
}

var paramRe = regexp.MustCompile(`\$\{\{?([A-Z0-9_]+)\}?\}`)

// write materializes c's MachineConfigs (templates processed, role labels
// added) as files in dir, and returns those of the case's pool.
func (c mcCase) write(t *testing.T, dir string) []*mcfgv1.MachineConfig {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var out []*mcfgv1.MachineConfig
	n := 0
	for _, in := range c.inputs {
		p := in.path
		if rel, ok := strings.CutPrefix(p, "fixtures:"); ok {
			p = fixtures.Path(t, strings.Split(rel, "/")...)
		}
		var files []string
		if fi, err := os.Stat(p); err != nil {
			t.Fatal(err)
		} else if fi.IsDir() {
			ents, err := os.ReadDir(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				files = append(files, filepath.Join(p, e.Name()))
			}
		} else {
			files = []string{p}
		}
		for _, f := range files {
			for _, doc := range documents(t, f, in.params) {
				mc := decodeMC(t, doc)
				if mc.Kind != "MachineConfig" {
					continue
				}
				if in.role != "" && mc.Labels[roleLabel] == "" {
					if mc.Labels == nil {
						mc.Labels = map[string]string{}
					}
					mc.Labels[roleLabel] = in.role
				}
				b, err := yaml.Marshal(mc)
				if err != nil {
					t.Fatal(err)
				}
				n++
				name := fmt.Sprintf("%02d-%s.yaml", n, filepath.Base(strings.TrimSuffix(f, filepath.Ext(f))))
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
				if c.selects(t, mc) {
					out = append(out, mc)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("case %s selects no MachineConfig", c.name)
	}
	return out
}

// documents returns the objects of f: the file itself, or a Template's
// objects after substituting ${PARAM} and ${{PARAM}} with params, then the
// parameters' defaults.
func documents(t *testing.T, f string, params map[string]string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		Kind       string `json:"kind"`
		Parameters []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"parameters"`
	}
	if err := yaml.Unmarshal(raw, &head); err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	if head.Kind != "Template" {
		return [][]byte{raw}
	}
	values := map[string]string{}
	for _, p := range head.Parameters {
		values[p.Name] = p.Value
	}
	for k, v := range params {
		values[k] = v
	}
	var tpl struct {
		Objects []any `json:"objects"`
	}
	if err := yaml.Unmarshal(raw, &tpl); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, o := range tpl.Objects {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		// ${{P}} is replaced by the value as YAML (JSON), ${P} as a string.
		s := paramRe.ReplaceAllStringFunc(string(b), func(m string) string {
			name := paramRe.FindStringSubmatch(m)[1]
			if strings.HasPrefix(m, "${{") {
				return values[name]
			}
			return strings.ReplaceAll(values[name], "\n", "\\n")
		})
		out = append(out, []byte(s))
	}
	return out
}
