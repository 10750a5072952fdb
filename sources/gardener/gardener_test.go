package gardener_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/sources/gardener"
	"github.com/oslayer/oslayer/sources/model"
	"github.com/oslayer/oslayer/test/fixtures"
)

// fakeImages serves imageRef files without a registry: content is derived
// from image and path, the pinned reference is IMAGE@sha256:<fixed>.
type fakeImages struct {
	calls []string
}

const fakeDigest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

func (f *fakeImages) ReadFile(_ context.Context, image, p string) ([]byte, uint32, string, error) {
	f.calls = append(f.calls, image+" "+p)
	repo, _, _ := strings.Cut(image, ":")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repo = image[:i]
	}
	return []byte("binary " + p + " from " + image), 0o755, repo + "@" + fakeDigest, nil
}

// rawOSC is the independent view of an OSC document, decoded generically.
type rawOSC struct {
	files    map[string]map[string]any // path -> file
	units    map[string]bool
	dropIns  map[string]map[string]bool // unit -> drop-in names
	criCount int
}

func countRaw(t *testing.T, data []byte) rawOSC {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m["kind"] == "Secret" {
		d := m["data"].(map[string]any)["osc.yaml"].(string)
		b, err := base64.StdEncoding.DecodeString(d)
		if err != nil {
			t.Fatal(err)
		}
		return countRaw(t, b)
	}
	r := rawOSC{files: map[string]map[string]any{}, units: map[string]bool{}, dropIns: map[string]map[string]bool{}}
	get := func(obj any, k string) []any {
		mm, _ := obj.(map[string]any)
		l, _ := mm[k].([]any)
		return l
	}
	spec, status := m["spec"], m["status"]
	if sm, ok := spec.(map[string]any); ok && sm["criConfig"] != nil {
		r.criCount = 1
	}
	for _, f := range append(get(spec, "files"), get(status, "extensionFiles")...) {
		fm := f.(map[string]any)
		r.files[fm["path"].(string)] = fm
	}
	for _, u := range append(get(spec, "units"), get(status, "extensionUnits")...) {
		um := u.(map[string]any)
		n := um["name"].(string)
		r.units[n] = true
		if r.dropIns[n] == nil {
			r.dropIns[n] = map[string]bool{}
		}
		for _, d := range get(um, "dropIns") {
			r.dropIns[n][d.(map[string]any)["name"].(string)] = true
		}
	}
	return r
}

// generated lists every file of gardener/generated and what Load must do
// with it: decode (err == "") or fail with an error containing err, and why.
var generated = []struct {
	name, err, why string
}{
	// Per-machine user data with <<BOOTSTRAP_TOKEN>> and <<MACHINE_NAME>>.
	{"osc-worker-a-provision.yaml", `osc-worker-a-provision.yaml: spec.purpose is "provision": a provision OperatingSystemConfig is the per-machine user data`, "purpose provision"},
	{"osc-worker-a-reconcile.yaml", "", ""},
	{"osc-worker-a-reconcile-full.yaml", "", ""},
	{"osc-worker-a-reconcile-with-secretref.yaml", "", ""},
	{"osc.yaml-worker-a-resolved", "", ""},
	{"osc.yaml-worker-a-unresolved", "", ""},
	{"secret-osc-worker-a-resolved.yaml", "", ""},
	{"secret-osc-worker-a-unresolved.yaml", "", ""},
	// The node-agent integration test uses placeholder unit names ("unit1")
	// and drop-in names ("drop") that systemd would ignore: refused.
	{"osc-nodeagent-integration-test.yaml", `spec.units[0]: invalid unit name "unit1": no unit type suffix`, "test-only unit names"},
	{"secret-osc-nodeagent-integration-test.yaml", `data[osc.yaml].status.extensionUnits[4].dropIns[0]: unit existing-unit.service: invalid drop-in name "drop": must end in .conf`, "test-only drop-in names"},
	// Secrets referenced by secretRef files, not OSC carriers.
	{"secret-example-file-referenced.yaml", `Secret shoot--dev--example/example-file has no key "osc.yaml"`, "secretRef target"},
	{"secret-file9-nodeagent-integration-test.yaml", `Secret kube-system/file9-secret has no key "osc.yaml"`, "secretRef target"},
	// Ignition user data rendered by os-coreos from the provision OSC.
	{"os-coreos-userdata-worker-a-provision.ign.json", `kind "" (apiVersion "") is neither an OperatingSystemConfig nor a Secret`, "Ignition output, not an OSC"},
	{"os-coreos-userdata-worker-a-provision.ign.raw.json", `kind "" (apiVersion "") is neither an OperatingSystemConfig nor a Secret`, "Ignition output, not an OSC"},
}

func TestGeneratedFixturesAreAllListed(t *testing.T) {
	dir := fixtures.Path(t, "gardener", "generated")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, g := range generated {
		listed[g.name] = true
	}
	for _, e := range ents {
		if !listed[e.Name()] {
			t.Errorf("fixture gardener/generated/%s is not covered by the test table", e.Name())
		}
	}
}

func TestGeneratedFixtures(t *testing.T) {
	dir := fixtures.Path(t, "gardener", "generated")
	for _, g := range generated {
		t.Run(g.name, func(t *testing.T) {
			p := filepath.Join(dir, g.name)
			imgs := &fakeImages{}
			cfg, err := gardener.Load(context.Background(), []string{p}, gardener.Options{Images: imgs, SecretsDir: dir})
			if g.err != "" {
				if err == nil || !strings.Contains(err.Error(), g.err) {
					t.Fatalf("skipped as %s: want error containing %q, got %v", g.why, g.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			raw := countRaw(t, data)
			checkAccounted(t, cfg, raw)
			if len(cfg.Inputs) != 1 || cfg.Inputs[0].Path != p || len(cfg.Inputs[0].SHA256) != 64 {
				t.Errorf("inputs = %+v", cfg.Inputs)
			}
			// Every imageRef was read through the image reader and pinned.
			nImage := 0
			for path, f := range raw.files {
				c := f["content"].(map[string]any)
				if ir, ok := c["imageRef"].(map[string]any); ok {
					nImage++
					mf := findFile(cfg, path)
					if mf == nil {
						t.Errorf("imageRef file %s not baked", path)
						continue
					}
					if !strings.HasSuffix(mf.FromImage, "@"+fakeDigest) || string(mf.Data) != fmt.Sprintf("binary %s from %s", ir["filePathInImage"], ir["image"]) {
						t.Errorf("imageRef file %s: FromImage %q data %q", path, mf.FromImage, mf.Data)
					}
				}
			}
			if len(imgs.calls) != nImage {
				t.Errorf("image reader called %d times, want %d", len(imgs.calls), nImage)
			}
		})
	}
}

// checkAccounted asserts that every raw file is baked or runtime, every
// unit and drop-in is present, and nothing else appears.
func checkAccounted(t *testing.T, cfg *model.Config, raw rawOSC) {
	t.Helper()
	got := map[string]bool{}
	for _, f := range cfg.Files {
		if got[f.Path] {
			t.Errorf("file %s twice", f.Path)
		}
		got[f.Path] = true
		if f.Origin.Kind != gardener.Kind || !strings.Contains(f.Origin.Field, "iles[") {
			t.Errorf("file %s: origin %+v", f.Path, f.Origin)
		}
		rf := raw.files[f.Path]
		if rf == nil {
			t.Errorf("file %s not in the document", f.Path)
			continue
		}
		want := uint32(0o600)
		if p, ok := rf["permissions"].(float64); ok {
			want = uint32(p)
		}
		if f.Mode != want {
			t.Errorf("file %s: mode %04o, want %04o", f.Path, f.Mode, want)
		}
		if c := rf["content"].(map[string]any); c["inline"] != nil {
			in := c["inline"].(map[string]any)
			wantData := in["data"].(string)
			if in["encoding"] == "b64" {
				b, _ := base64.StdEncoding.DecodeString(wantData)
				wantData = string(b)
			}
			if string(f.Data) != wantData {
				t.Errorf("file %s: content differs from the document", f.Path)
			}
		}
	}
	for _, r := range cfg.Runtime {
		if r.Item == "spec.criConfig" {
			continue
		}
		if got[r.Item] {
			t.Errorf("runtime item %s is also baked", r.Item)
		}
		got[r.Item] = true
		if raw.files[r.Item] == nil {
			t.Errorf("runtime item %s not in the document", r.Item)
		}
	}
	if len(got) != len(raw.files) {
		t.Errorf("%d files baked or runtime, document has %d", len(got), len(raw.files))
	}
	cri := 0
	for _, r := range cfg.Runtime {
		if r.Item == "spec.criConfig" {
			cri++
		}
	}
	if cri != raw.criCount {
		t.Errorf("criConfig runtime entries %d, want %d", cri, raw.criCount)
	}
	units := map[string]bool{}
	for _, u := range cfg.Units {
		units[u.Name] = true
		if !raw.units[u.Name] {
			t.Errorf("unit %s not in the document", u.Name)
		}
		if u.Enabled == nil {
			t.Errorf("unit %s: Enabled unset", u.Name)
		}
		dn := map[string]bool{}
		for _, d := range u.DropIns {
			dn[d.Name] = true
		}
		if len(dn) != len(u.DropIns) || len(dn) != len(raw.dropIns[u.Name]) {
			t.Errorf("unit %s: %d drop-ins, document has %d", u.Name, len(u.DropIns), len(raw.dropIns[u.Name]))
		}
	}
	if len(units) != len(raw.units) {
		t.Errorf("%d units, document has %d", len(units), len(raw.units))
	}
}

func findFile(cfg *model.Config, p string) *model.File {
	for i := range cfg.Files {
		if cfg.Files[i].Path == p {
			return &cfg.Files[i]
		}
	}
	return nil
}

func findUnit(cfg *model.Config, n string) *model.Unit {
	for i := range cfg.Units {
		if cfg.Units[i].Name == n {
			return &cfg.Units[i]
		}
	}
	return nil
}

func findRuntime(cfg *model.Config, item string) *model.Runtime {
	for i := range cfg.Runtime {
		if cfg.Runtime[i].Item == item {
			return &cfg.Runtime[i]
		}
	}
	return nil
}

// TestReconcileFullSemantics pins the node-agent behaviour on the full
// worker OSC: extension merge, enablement, defaults, secretRef, imageRef.
func TestReconcileFullSemantics(t *testing.T) {
	dir := fixtures.Path(t, "gardener", "generated")
	p := filepath.Join(dir, "osc-worker-a-reconcile-full.yaml")
	ctx := context.Background()
	cfg, err := gardener.Load(ctx, []string{p}, gardener.Options{Images: &fakeImages{}, SecretsDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// kubelet.service: content from spec, drop-in appended from status.
	k := findUnit(cfg, "kubelet.service")
	if k == nil || k.Contents == nil || !strings.Contains(*k.Contents, "ExecStart") {
		t.Fatalf("kubelet.service = %+v", k)
	}
	if k.Origin.Field != "spec.units[0]" && !strings.HasPrefix(k.Origin.Field, "spec.units[") {
		t.Errorf("kubelet.service origin %+v", k.Origin)
	}
	var cg *model.DropIn
	for i := range k.DropIns {
		if k.DropIns[i].Name == "10-configure-cgroup-driver.conf" {
			cg = &k.DropIns[i]
		}
	}
	if cg == nil || !strings.HasPrefix(cg.Origin.Field, "status.extensionUnits[4].dropIns[0]") {
		t.Errorf("kubelet.service extension drop-in missing or wrong origin: %+v", k.DropIns)
	}
	// command: stop + enable: false.
	if u := findUnit(cfg, "update-engine.service"); u == nil || u.Enabled == nil || *u.Enabled || u.Contents != nil || len(u.DropIns) != 1 {
		t.Errorf("update-engine.service = %+v", u)
	}
	if u := findUnit(cfg, "systemd-timesyncd.service"); u == nil || u.Enabled == nil || !*u.Enabled {
		t.Errorf("systemd-timesyncd.service = %+v", u)
	}
	// status.extensionFiles appended.
	if f := findFile(cfg, "/opt/bin/kubelet_cgroup_driver.sh"); f == nil || f.Mode != 0o755 || f.Origin.Field != "status.extensionFiles[1]" {
		t.Errorf("extension file = %+v", f)
	}
	// secretRef: runtime by default.
	r := findRuntime(cfg, "/var/lib/example/file.txt")
	if r == nil || r.Reason != gardener.ReasonSecret || r.Origin.Field != "spec.files[19]" {
		t.Errorf("secretRef runtime = %+v", r)
	}
	if findFile(cfg, "/var/lib/example/file.txt") != nil {
		t.Error("secret baked without BakeSecrets")
	}
	if r := findRuntime(cfg, "spec.criConfig"); r == nil || r.Reason != gardener.ReasonCRI {
		t.Errorf("criConfig runtime = %+v", r)
	}
	// imageRef: pinned.
	if f := findFile(cfg, "/opt/bin/kubelet"); f == nil || f.FromImage != "europe-docker.pkg.dev/gardener-project/releases/hyperkube@"+fakeDigest {
		t.Errorf("kubelet imageRef = %+v", f)
	}

	// With BakeSecrets the secret is baked and its Secret recorded as input.
	cfg, err = gardener.Load(ctx, []string{p}, gardener.Options{Images: &fakeImages{}, SecretsDir: dir, BakeSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	f := findFile(cfg, "/var/lib/example/file.txt")
	if f == nil || !f.Secret || string(f.Data) != "# example file delivered via secretRef\nkey=value\n" || f.Mode != 0o644 {
		t.Fatalf("baked secret = %+v", f)
	}
	if findRuntime(cfg, "/var/lib/example/file.txt") != nil {
		t.Error("baked secret still listed as runtime")
	}
	var names []string
	for _, in := range cfg.Inputs {
		names = append(names, in.Kind+" "+in.Name)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "OperatingSystemConfig gardener-node-agent-worker-a-67e806e018b7d00f-original,Secret shoot--dev--example/example-file" {
		t.Errorf("inputs = %v", names)
	}

	// Without a secrets dir, baking is an error.
	_, err = gardener.Load(ctx, []string{p}, gardener.Options{Images: &fakeImages{}, BakeSecrets: true})
	if err == nil || !strings.Contains(err.Error(), "spec.files[19]: /var/lib/example/file.txt: content.secretRef example-file key file.txt: baking secrets needs a secrets directory") {
		t.Errorf("bake without dir: %v", err)
	}
	// Without an image reader, an imageRef is an error naming the file.
	_, err = gardener.Load(ctx, []string{p}, gardener.Options{SecretsDir: dir})
	if err == nil || !strings.Contains(err.Error(), "/opt/bin/kubelet: content.imageRef europe-docker.pkg.dev/gardener-project/releases/hyperkube:v1.34.3:/kubelet: no image reader configured") {
		t.Errorf("imageRef without reader: %v", err)
	}
}

// TestSecretAndPlainOSCAgree: the Secret wrapper and the bare osc.yaml hold
// the same OSC, so they decode to the same items, and loading both together
// is fine (identical duplicates).
func TestSecretAndPlainOSCAgree(t *testing.T) {
	dir := fixtures.Path(t, "gardener", "generated")
	ctx := context.Background()
	opts := gardener.Options{Images: &fakeImages{}}
	a, err := gardener.Load(ctx, []string{filepath.Join(dir, "secret-osc-worker-a-resolved.yaml")}, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := gardener.Load(ctx, []string{filepath.Join(dir, "osc.yaml-worker-a-resolved")}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Files) != len(b.Files) || len(a.Units) != len(b.Units) || len(a.Files) != 22 || len(a.Units) != 17 {
		t.Fatalf("secret: %d files %d units; plain: %d files %d units", len(a.Files), len(a.Units), len(b.Files), len(b.Units))
	}
	if !strings.HasPrefix(a.Files[0].Origin.Field, "data[osc.yaml].spec.files[") || a.Files[0].Origin.Name != "kube-system/gardener-node-agent-worker-a-67e806e018b7d00f" {
		t.Errorf("secret origin = %+v", a.Files[0].Origin)
	}
	both, err := gardener.Load(ctx, []string{filepath.Join(dir, "secret-osc-worker-a-resolved.yaml"), filepath.Join(dir, "osc.yaml-worker-a-resolved")}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(both.Files) != 22 || len(both.Inputs) != 2 {
		t.Errorf("both: %d files, %d inputs", len(both.Files), len(both.Inputs))
	}
}

// verbatim lists gardener/verbatim: what decodes and why the rest is
// skipped. unknown is the field the OSC API no longer has: ignored with a
// warning, as gardener-node-agent ignores it, and refused with Strict.
var verbatim = []struct {
	name, err, why, unknown string
}{
	{"osc-crddeletionprotection-testdata.yaml", `spec.purpose is "provision"`, "purpose provision", ""},
	{"docs-osc-cri-example.yaml", "", "docs example with a placeholder type and the pre-criConfig field name", "spec.cri"},
	{"docs-osc-hostname-files-example.yaml", `is neither an OperatingSystemConfig`, "spec/status fragment without apiVersion/kind", ""},
	{"docs-osc-reconcile-example.yaml", "", "legacy file-level encoding", "spec.files[0].encoding"},
	{"docs-osc-status-extensionunits-example.yaml", `is neither an OperatingSystemConfig`, "status fragment only", ""},
	{"docs-osc-status-inplaceupdates-example.yaml", `is neither an OperatingSystemConfig`, "status fragment only", ""},
	{"kubelet-config-configcodec_test.yaml", `kind "KubeletConfiguration"`, "a KubeletConfiguration, not an OSC", ""},
	{"os-coreos-example-40-operatingsystemconfig.yaml", "", "legacy file-level encoding", "spec.files[0].encoding"},
	{"os-gardenlinux-example-40-operatingsystemconfig-gardenlinux.yaml", "", "legacy file-level encoding", "spec.files[0].encoding"},
	{"os-gardenlinux-example-40-operatingsystemconfig-memoryonegardenlinux.yaml", "", "legacy file-level encoding", "spec.files[0].encoding"},
	{"osc.yaml-nodeagent-secrets_test", `status.extensionFiles[0]: /some/other/path: content must have exactly one of inline, secretRef, imageRef (has 0)`, "unit-test data: a file with empty content {}", ""},
	{"secret-nodeagent-secrets_test.yaml", `data[osc.yaml].status.extensionFiles[0]: /some/other/path: content must have exactly one of`, "unit-test data: a file with empty content {}", ""},
}

func TestVerbatimFixtures(t *testing.T) {
	dir := fixtures.Path(t, "gardener", "verbatim")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, v := range verbatim {
		listed[v.name] = true
		t.Run(v.name, func(t *testing.T) {
			in := filepath.Join(dir, v.name)
			cfg, err := gardener.Load(context.Background(), []string{in}, gardener.Options{Images: &fakeImages{}})
			if v.unknown != "" {
				if err != nil {
					t.Fatalf("%s: %v", v.why, err)
				}
				checkUnknownWarning(t, cfg.Warnings, in, v.unknown)
				_, serr := gardener.Load(context.Background(), []string{in}, gardener.Options{Images: &fakeImages{}, Strict: true})
				if want := fmt.Sprintf("unknown field %q", v.unknown); serr == nil || !strings.Contains(serr.Error(), want) {
					t.Errorf("Strict: want error containing %s, got %v", want, serr)
				}
			}
			if v.err != "" {
				if err == nil || !strings.Contains(err.Error(), v.err) {
					t.Fatalf("skipped as %s: want error containing %q, got %v", v.why, v.err, err)
				}
				t.Logf("not decodable (%s): %v", v.why, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(filepath.Join(dir, v.name))
			checkAccounted(t, cfg, countRaw(t, data))
		})
	}
	for _, e := range ents {
		if !listed[e.Name()] {
			t.Errorf("fixture gardener/verbatim/%s is not covered by the test table", e.Name())
		}
	}
}

// TestHostnameFragmentAsOSC wraps the docs' hostName fragment into a
// complete OSC: both files are runtime-delivered with the host named.
func TestHostnameFragmentAsOSC(t *testing.T) {
	frag, err := os.ReadFile(fixtures.Path(t, "gardener", "verbatim", "docs-osc-hostname-files-example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The fragment uses YAML octal 0644; JSON permissions are decimal.
	doc := "apiVersion: extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfig\nmetadata:\n  name: host\n" +
		strings.ReplaceAll(string(frag), "permissions: 0644", "permissions: 420")
	cfg, err := gardener.Decode(context.Background(), "hostname.yaml", []byte(doc), gardener.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Files) != 0 || len(cfg.Runtime) != 2 {
		t.Fatalf("files %d runtime %+v", len(cfg.Files), cfg.Runtime)
	}
	if r := cfg.Runtime[1]; r.Item != "/etc/some/other/file" || !strings.Contains(r.Reason, `only for host "worker-1"`) || r.Origin.Field != "status.extensionFiles[0]" {
		t.Errorf("runtime = %+v", r)
	}
}

const head = "apiVersion: extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfig\nmetadata:\n  name: bad\nspec:\n  type: coreos\n  purpose: reconcile\n"

func fileDoc(path, content string) string {
	return head + "  files:\n  - path: " + path + "\n    content:\n" + content
}

func TestHostileInputs(t *testing.T) {
	// The documented limit is model.MaxContentSize (64 MiB); the test lowers
	// it through Options to stay fast, TestDefaultLimit checks the default.
	const limit = 1024
	bigB64 := base64.StdEncoding.EncodeToString(make([]byte, limit+1))
	bigPlain := strings.Repeat("x", limit+1)
	cases := []struct{ name, doc, want string }{
		{"relative path", fileDoc("etc/x", "      inline: {data: x}\n"), `bad.yaml (OperatingSystemConfig bad) spec.files[0]: relative path "etc/x": paths must be absolute`},
		{"dotdot path", fileDoc("/etc/../x", "      inline: {data: x}\n"), `spec.files[0]: path "/etc/../x" contains a ".." element`},
		{"NUL path", fileDoc(`"/etc/a\0b"`, "      inline: {data: x}\n"), `spec.files[0]: path "/etc/a\x00b" contains a NUL byte`},
		{"invalid UTF-8 path", fileDoc("/etc/\xff", "      inline: {data: x}\n"), `bad.yaml: not valid YAML/JSON: yaml: invalid leading UTF-8 octet`},
		{"invalid base64", fileDoc("/etc/x", "      inline: {encoding: b64, data: '!!notbase64'}\n"), `spec.files[0]: /etc/x: content.inline: invalid base64 (encoding b64): illegal base64 data at input byte 0`},
		{"unknown encoding", fileDoc("/etc/x", "      inline: {encoding: gzip, data: x}\n"), `content.inline: unknown encoding "gzip"`},
		{"unknown field", fileDoc("/etc/x", "      inline: {data: x}\n      bogus: 1\n"), `bad.yaml: OperatingSystemConfig: unknown field "spec.files[0].content.bogus"`},
		{"unknown top field", head + "  fles: []\n", `unknown field "spec.fles"`},
		{"duplicate field", head + "  type: other\n", `line 8: key "type" already set in map`},
		{"conflicting duplicates", head + "  files:\n  - path: /etc/x\n    content: {inline: {data: a}}\n  - path: /etc/x\n    content: {inline: {data: b}}\n",
			`conflicting definitions of /etc/x: bad.yaml (OperatingSystemConfig bad) spec.files[0] and bad.yaml (OperatingSystemConfig bad) spec.files[1]`},
		{"invalid unit name", head + "  units:\n  - name: foo\n    content: x\n", `spec.units[0]: invalid unit name "foo": no unit type suffix`},
		{"unit name bad char", head + "  units:\n  - name: \"foo bar.service\"\n", `invalid unit name "foo bar.service": character ' ' not allowed`},
		{"drop-in for invalid unit", head + "  units:\n  - name: ../x.service\n    dropIns:\n    - {name: a.conf, content: x}\n", `spec.units[0]: drop-ins for unit "../x.service": invalid unit name`},
		{"drop-in name", head + "  units:\n  - name: x.service\n    dropIns:\n    - {name: a.txt, content: x}\n", `spec.units[0].dropIns[0]: unit x.service: invalid drop-in name "a.txt": must end in .conf`},
		{"filePaths missing", head + "  units:\n  - name: x.service\n    filePaths: [/etc/missing]\n", `spec.units[0].filePaths[0]: /etc/missing: filePaths of unit x.service names a file that is not part of the OperatingSystemConfig`},
		{"oversized", fileDoc("/etc/x", "      inline: {encoding: b64, data: "+bigB64+"}\n"), `content.inline: content of 1025 bytes exceeds the limit of 1024 bytes`},
		{"oversized plain", fileDoc("/etc/x", "      inline: {data: "+bigPlain+"}\n"), `spec.files[0]: /etc/x: content.inline: content of 1025 bytes exceeds the limit of 1024 bytes`},
		{"oversized unit", head + "  units:\n  - name: x.service\n    content: " + bigPlain + "\n", `spec.units[0]: unit x.service content: content of 1025 bytes exceeds the limit of 1024 bytes`},
		{"two contents", fileDoc("/etc/x", "      inline: {data: x}\n      secretRef: {name: a, dataKey: b}\n"), `content must have exactly one of inline, secretRef, imageRef (has 2)`},
		{"bad permissions", head + "  files:\n  - path: /etc/x\n    permissions: 65535\n    content: {inline: {data: a}}\n", `permissions 65535 (0177777) has bits outside 07777`},
		{"bad command", head + "  units:\n  - name: x.service\n    command: reload\n", `unit x.service: unknown command "reload"`},
		{"wrong kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", `bad.yaml: kind "ConfigMap" (apiVersion "v1") is neither an OperatingSystemConfig nor a Secret with key osc.yaml`},
		{"not yaml", "{[", `bad.yaml: not valid YAML/JSON`},
		{"secret bad base64", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata:\n  osc.yaml: '!!!'\n", `bad.yaml: Secret s: illegal base64 data`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := gardener.Decode(context.Background(), "bad.yaml", []byte(c.doc), gardener.Options{MaxContentSize: limit,
				// Unknown fields are refused only with Strict
				// (TestUnknownFields).
				Strict: strings.Contains(c.want, "unknown field")})
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

func TestMissingSecret(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s.yaml"), []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: present}\nstringData: {k: v}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	doc := fileDoc("/etc/x", "      secretRef: {name: absent, dataKey: k}\n")
	_, err := gardener.Decode(ctx, "bad.yaml", []byte(doc), gardener.Options{SecretsDir: dir})
	if err == nil || !strings.Contains(err.Error(), `spec.files[0]: /etc/x: content.secretRef: secret "absent" not found in `+dir) {
		t.Errorf("missing secret: %v", err)
	}
	doc = fileDoc("/etc/x", "      secretRef: {name: present, dataKey: nokey}\n")
	_, err = gardener.Decode(ctx, "bad.yaml", []byte(doc), gardener.Options{SecretsDir: dir, BakeSecrets: true})
	if err == nil || !strings.Contains(err.Error(), `secret "present" (`+filepath.Join(dir, "s.yaml")+`) has no key "nokey" (keys: k)`) {
		t.Errorf("missing key: %v", err)
	}
	doc = fileDoc("/etc/x", "      secretRef: {name: present, dataKey: k}\n")
	cfg, err := gardener.Decode(ctx, "ok.yaml", []byte(doc), gardener.Options{SecretsDir: dir, BakeSecrets: true})
	if err != nil || len(cfg.Files) != 1 || string(cfg.Files[0].Data) != "v" || !cfg.Files[0].Secret {
		t.Errorf("stringData secret: %+v %v", cfg, err)
	}
}

func TestImageReaderError(t *testing.T) {
	doc := fileDoc("/opt/bin/x", "      imageRef: {image: reg.example/x:1, filePathInImage: /x}\n")
	_, err := gardener.Decode(context.Background(), "bad.yaml", []byte(doc), gardener.Options{Images: failImages{}})
	if err == nil || !strings.Contains(err.Error(), "spec.files[0]: /opt/bin/x: content.imageRef: boom") {
		t.Errorf("got %v", err)
	}
}

type failImages struct{}

func (failImages) ReadFile(context.Context, string, string) ([]byte, uint32, string, error) {
	return nil, 0, "", errors.New("boom")
}

// TestUnitMergeRules checks node-agent unit merging by name and the
// enablement defaults on a small OSC.
func TestUnitMergeRules(t *testing.T) {
	doc := head + `  files:
  - path: /etc/a
    content: {inline: {data: a}}
  units:
  - name: a.service
    content: "[Unit]\n"
    dropIns: [{name: 1.conf, content: one}]
  - name: b.service
    command: stop
  - name: c.service
    enable: false
  - name: d@.service
    content: x
status:
  extensionUnits:
  - name: a.service
    enable: false
    content: "[Unit]\nDescription=new\n"
    dropIns: [{name: 2.conf, content: two}]
    filePaths: [/etc/a]
  - name: b.service
    command: start
`
	cfg, err := gardener.Decode(context.Background(), "u.yaml", []byte(doc), gardener.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range cfg.Units {
		c := "<nil>"
		if u.Contents != nil {
			c = *u.Contents
		}
		var ds []string
		for _, d := range u.DropIns {
			ds = append(ds, d.Name+"="+d.Contents+"@"+d.Origin.Field)
		}
		got = append(got, fmt.Sprintf("%s enabled=%t content=%q dropins=%v", u.Name, *u.Enabled, c, ds))
	}
	want := []string{
		`a.service enabled=false content="[Unit]\nDescription=new\n" dropins=[1.conf=one@spec.units[0].dropIns[0] 2.conf=two@status.extensionUnits[0].dropIns[0]]`,
		`b.service enabled=true content="<nil>" dropins=[]`,
		`c.service enabled=false content="<nil>" dropins=[]`,
		`d@.service enabled=true content="x" dropins=[]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("units:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if cfg.Files[0].Mode != 0o600 || cfg.Files[0].UID != 0 {
		t.Errorf("default mode: %+v", cfg.Files[0])
	}
}

func TestMultiPathConflict(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	b := filepath.Join(dir, "b.yaml")
	os.WriteFile(a, []byte(fileDoc("/etc/x", "      inline: {data: one}\n")), 0o600)
	os.WriteFile(b, []byte(fileDoc("/etc/x", "      inline: {data: two}\n")), 0o600)
	_, err := gardener.Load(context.Background(), []string{a, b}, gardener.Options{})
	want := fmt.Sprintf("conflicting definitions of /etc/x: %s (OperatingSystemConfig bad) spec.files[0] and %s (OperatingSystemConfig bad) spec.files[0] (different content: 3 vs 3 bytes)", a, b)
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	// Same content twice is fine.
	if _, err := gardener.Load(context.Background(), []string{a, a}, gardener.Options{}); err != nil {
		t.Error(err)
	}
}

// TestJSONAndStringData: the same OSC as JSON, and wrapped in a Secret's
// stringData, decodes to the same items.
func TestJSONAndStringData(t *testing.T) {
	p := fixtures.Path(t, "gardener", "generated", "osc.yaml-worker-a-resolved")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	opts := gardener.Options{Images: &fakeImages{}}
	want, err := gardener.Decode(ctx, "osc.yaml", data, opts)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := gardener.Decode(ctx, "osc.yaml", j, opts)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "namespace": "kube-system"}, "stringData": map[string]string{"osc.yaml": string(data)}})
	if err != nil {
		t.Fatal(err)
	}
	fromSecret, err := gardener.Decode(ctx, "osc.yaml", sec, opts)
	if err != nil {
		t.Fatal(err)
	}
	strip := func(c *model.Config) string {
		var b strings.Builder
		for _, f := range c.Files {
			fmt.Fprintf(&b, "%s %o %x %s|", f.Path, f.Mode, f.Data, strings.TrimPrefix(f.Origin.Field, "data[osc.yaml]."))
		}
		for _, u := range c.Units {
			fmt.Fprintf(&b, "%s %t %d|", u.Name, *u.Enabled, len(u.DropIns))
		}
		return b.String()
	}
	if strip(fromJSON) != strip(want) || strip(fromSecret) != strip(want) {
		t.Error("JSON or stringData Secret decode differently")
	}
	if fromSecret.Inputs[0].Kind != "Secret" || fromSecret.Inputs[0].Name != "kube-system/s" {
		t.Errorf("inputs %+v", fromSecret.Inputs)
	}
}

// BenchmarkLoad measures decoding the largest Gardener fixture (the
// node-agent Secret) with a fake image reader.
func BenchmarkLoad(b *testing.B) {
	p := fixtures.Path(b, "gardener", "generated", "secret-osc-worker-a-unresolved.yaml")
	ctx := context.Background()
	for b.Loop() {
		if _, err := gardener.Load(ctx, []string{p}, gardener.Options{Images: &fakeImages{}}); err != nil {
			b.Fatal(err)
		}
	}
}

// An OSC, or the node-agent Secret around it, labelled for another worker
// pool than the one built is refused, naming the label and both pools.
func TestPoolLabelMismatch(t *testing.T) {
	ctx := context.Background()
	g := fixtures.Path(t, "gardener", "generated")
	for _, f := range []string{"osc-worker-a-reconcile.yaml", "secret-osc-worker-a-resolved.yaml"} {
		p := filepath.Join(g, f)
		if _, err := gardener.Load(ctx, []string{p}, gardener.Options{Pool: "worker-a", Images: &fakeImages{}}); err != nil {
			t.Errorf("%s for its own pool: %v", f, err)
		}
		if _, err := gardener.Load(ctx, []string{p}, gardener.Options{Images: &fakeImages{}}); err != nil {
			t.Errorf("%s without a pool: %v", f, err)
		}
		_, err := gardener.Load(ctx, []string{p}, gardener.Options{Pool: "master", Images: &fakeImages{}})
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "worker.gardener.cloud/pool=worker-a") || !strings.Contains(err.Error(), `"master"`) {
			t.Errorf("%s for pool master: %v", f, err)
		}
	}
}

// checkUnknownWarning wants exactly one warning for the unknown field,
// naming the file (and document) and the field path.
func checkUnknownWarning(t *testing.T, warnings []string, where, field string) {
	t.Helper()
	var got []string
	for _, w := range warnings {
		if strings.Contains(w, gardener.ReasonUnknownField) {
			got = append(got, w)
		}
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], where+" (") || !strings.Contains(got[0], ") "+field+": ") {
		t.Errorf("unknown-field warnings %q, want one for %s naming %s", got, field, where)
	}
}

// TestUnknownFields: fields the OSC API does not have are ignored, as
// gardener-node-agent's decoder ignores them, with a warning that names the
// file, the document and the field path; the rest of the OSC is decoded.
// Strict refuses them; a duplicate field is refused either way.
func TestUnknownFields(t *testing.T) {
	osc := head + "  cri: {name: containerd}\n  files:\n  - path: /etc/x\n    encoding: \"\"\n    content: {inline: {data: x, bogus: 1}}\n"
	ctx := context.Background()
	cfg, err := gardener.Decode(ctx, "in.yaml", []byte(osc), gardener.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Files) != 1 || string(cfg.Files[0].Data) != "x" {
		t.Errorf("files %+v", cfg.Files)
	}
	want := []string{
		"in.yaml (OperatingSystemConfig bad) spec.cri: " + gardener.ReasonUnknownField,
		"in.yaml (OperatingSystemConfig bad) spec.files[0].content.inline.bogus: " + gardener.ReasonUnknownField,
		"in.yaml (OperatingSystemConfig bad) spec.files[0].encoding: " + gardener.ReasonUnknownField,
	}
	if strings.Join(cfg.Warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings\n  %s\nwant\n  %s", strings.Join(cfg.Warnings, "\n  "), strings.Join(want, "\n  "))
	}
	if _, err := gardener.Decode(ctx, "in.yaml", []byte(osc), gardener.Options{Strict: true}); err == nil ||
		err.Error() != `in.yaml: OperatingSystemConfig: unknown field "spec.cri"`+"\n"+`unknown field "spec.files[0].content.inline.bogus"`+"\n"+`unknown field "spec.files[0].encoding"` {
		t.Errorf("Strict: %v", err)
	}

	// In a node-agent Secret, second document of the file.
	secret := "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: kube-system}\nstringData:\n  osc.yaml: |\n" +
		indent(head+"  removed: true\n", "    ")
	cfg, err = gardener.Decode(ctx, "two.yaml", []byte(head+"---\n"+secret), gardener.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkUnknownWarning(t, cfg.Warnings, "two.yaml (document 2)", "data[osc.yaml].spec.removed")

	if _, err := gardener.Decode(ctx, "dup.yaml", []byte(head+"  removed: 1\n  removed: 2\n"), gardener.Options{}); err == nil || !strings.Contains(err.Error(), `key "removed" already set`) {
		t.Errorf("duplicate unknown field: %v", err)
	}
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+by) + "\n"
}

// TestTypeErrorNamesDocumentAndItem: a value of the wrong type is reported
// like every other error: the document, the OSC's name and the field with
// its item index, in a plain OSC and in a node-agent Secret alike.
func TestTypeErrorNamesDocumentAndItem(t *testing.T) {
	osc := `apiVersion: extensions.gardener.cloud/v1alpha1
kind: OperatingSystemConfig
metadata:
  name: bad1
spec:
  type: coreos
  purpose: reconcile
  files:
  - path: /etc/a
    permissions: 420
    content: {inline: {data: "a"}}
  - path: /etc/b
    permissions: %s
    content: {inline: {data: "b"}}
`
	for _, tc := range []struct{ value, want string }{
		{`"rwx"`, `bad1.yaml (OperatingSystemConfig bad1) spec.files[1].permissions: got a string ("rwx"), want a number (uint32)`},
		{`[1]`, `bad1.yaml (OperatingSystemConfig bad1) spec.files[1].permissions: got a list, want a number (uint32)`},
	} {
		_, err := gardener.Decode(context.Background(), "bad1.yaml", []byte(fmt.Sprintf(osc, tc.value)), gardener.Options{})
		if err == nil || err.Error() != tc.want {
			t.Errorf("permissions: %s:\n got %v\nwant %s", tc.value, err, tc.want)
		}
	}
	secret := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: gardener-node-agent-worker, namespace: kube-system}
data:
  osc.yaml: %s
`, base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf(osc, `"rwx"`))))
	_, err := gardener.Decode(context.Background(), "secret.yaml", []byte(secret), gardener.Options{})
	want := `secret.yaml (OperatingSystemConfig bad1) data[osc.yaml].spec.files[1].permissions: got a string ("rwx"), want a number (uint32)`
	if err == nil || err.Error() != want {
		t.Errorf("Secret:\n got %v\nwant %s", err, want)
	}
}
