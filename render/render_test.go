package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/oslayer/oslayer/sources/gardener"
	"github.com/oslayer/oslayer/sources/machineconfig"
	"github.com/oslayer/oslayer/sources/model"
	"github.com/oslayer/oslayer/test/fixtures"
)

// fixtureCase is one render over the real inputs.
type fixtureCase struct {
	name    string
	oscs    []string // relative to the fixtures dir
	mcs     []string
	pool    string
	secrets string
	bake    bool
	// wantErr, when set, is part of the error the render must fail with.
	wantErr string
}

func fixtureCases() []fixtureCase {
	var cs []fixtureCase
	for _, plat := range []string{"aws", "baremetal", "gcp"} {
		for _, role := range []string{"master", "worker"} {
			cs = append(cs,
				fixtureCase{name: "mco-" + plat + "-" + role, mcs: []string{"mco/" + plat + "/" + role}, pool: role},
				fixtureCase{name: "mco-" + plat + "-rendered-" + role, mcs: []string{"mco/" + plat + "/rendered-" + role + ".yaml"}},
			)
		}
	}
	g := "gardener/generated/"
	cs = append(cs,
		fixtureCase{name: "gardener-reconcile-full", oscs: []string{g + "osc-worker-a-reconcile-full.yaml"}},
		fixtureCase{name: "gardener-reconcile", oscs: []string{g + "osc-worker-a-reconcile.yaml"}},
		fixtureCase{name: "gardener-provision", oscs: []string{g + "osc-worker-a-provision.yaml"}, wantErr: `spec.purpose is "provision": a provision OperatingSystemConfig is the per-machine user data that bootstraps gardener-node-agent (placeholders such as <<BOOTSTRAP_TOKEN>> and <<MACHINE_NAME>>`},
		fixtureCase{name: "gardener-secret-resolved", oscs: []string{g + "secret-osc-worker-a-resolved.yaml"}},
		fixtureCase{name: "gardener-secret-unresolved", oscs: []string{g + "secret-osc-worker-a-unresolved.yaml"}, secrets: g},
		fixtureCase{name: "gardener-secret-unresolved-baked", oscs: []string{g + "secret-osc-worker-a-unresolved.yaml"}, secrets: g, bake: true},
		fixtureCase{name: "gardener-osc.yaml-resolved", oscs: []string{g + "osc.yaml-worker-a-resolved"}},
		fixtureCase{name: "gardener-osc.yaml-unresolved", oscs: []string{g + "osc.yaml-worker-a-unresolved"}},
		// The node-agent integration test's OSC uses unit names without a
		// type suffix ("unit1"), which systemd refuses: a clear error.
		fixtureCase{name: "gardener-nodeagent-integration", oscs: []string{g + "secret-osc-nodeagent-integration-test.yaml"}, secrets: g,
			wantErr: `invalid unit name "unit1": no unit type suffix`},
		fixtureCase{name: "gardener-with-secretref", oscs: []string{g + "osc-worker-a-reconcile-with-secretref.yaml"}, secrets: g},
	)
	// gardener/verbatim: documentation fragments and examples. The complete
	// OSCs render; the rest fail with a clear reason, asserted here.
	v := "gardener/verbatim/"
	cs = append(cs,
		fixtureCase{name: "gardener-verbatim-crddeletionprotection", oscs: []string{v + "osc-crddeletionprotection-testdata.yaml"}, wantErr: `spec.purpose is "provision"`},
		// Examples with fields the OSC API no longer has (a file-level
		// "encoding"; the docs' placeholder "cri" block of an older API):
		// ignored with a warning, as gardener-node-agent ignores them.
		fixtureCase{name: "gardener-verbatim-os-coreos-example", oscs: []string{v + "os-coreos-example-40-operatingsystemconfig.yaml"}},
		fixtureCase{name: "gardener-verbatim-gardenlinux-example", oscs: []string{v + "os-gardenlinux-example-40-operatingsystemconfig-gardenlinux.yaml"}},
		fixtureCase{name: "gardener-verbatim-docs-reconcile", oscs: []string{v + "docs-osc-reconcile-example.yaml"}},
		fixtureCase{name: "gardener-verbatim-docs-cri", oscs: []string{v + "docs-osc-cri-example.yaml"}},
		// Fragments (spec/status only, no kind): not complete OSCs.
		fixtureCase{name: "gardener-verbatim-docs-hostname", oscs: []string{v + "docs-osc-hostname-files-example.yaml"}, wantErr: "is neither an OperatingSystemConfig nor a Secret"},
		fixtureCase{name: "gardener-verbatim-docs-extensionunits", oscs: []string{v + "docs-osc-status-extensionunits-example.yaml"}, wantErr: "is neither an OperatingSystemConfig nor a Secret"},
		// Not an OSC at all.
		fixtureCase{name: "gardener-verbatim-kubelet-config", oscs: []string{v + "kubelet-config-configcodec_test.yaml"}, wantErr: "is neither an OperatingSystemConfig nor a Secret"},
		// The node-agent unit test's OSC has an extension file without content.
		fixtureCase{name: "gardener-verbatim-nodeagent-secret", oscs: []string{v + "secret-nodeagent-secrets_test.yaml"}, wantErr: "content must have exactly one of inline, secretRef, imageRef"},
		// MCO misc: the ssh-key MCs (passwd is runtime-delivered) and a
		// spec 2.2 Ignition config (converted as the MCO converts it).
		fixtureCase{name: "mco-misc-99-worker-ssh", mcs: []string{"mco/misc/99_openshift-machineconfig_worker.yaml"}},
		fixtureCase{name: "mco-misc-ignition-2.2", mcs: []string{"mco/misc/server-test-config.yaml"}},
	)
	return cs
}

func (c fixtureCase) request(t testing.TB, dir string, images model.ImageFiles) Request {
	req := Request{Pool: c.pool, BakeSecrets: c.bake, Images: images}
	for _, p := range c.oscs {
		req.OSCs = append(req.OSCs, filepath.Join(dir, p))
	}
	for _, p := range c.mcs {
		req.MachineConfigs = append(req.MachineConfigs, filepath.Join(dir, p))
	}
	if c.secrets != "" {
		req.SecretsDir = filepath.Join(dir, c.secrets)
	}
	return req
}

// load decodes and merges like Render does, for the accounting check.
func load(t testing.TB, req Request) *model.Config {
	ctx := context.Background()
	var cfgs []*model.Config
	if len(req.OSCs) > 0 {
		c, err := gardener.Load(ctx, req.OSCs, gardener.Options{SecretsDir: req.SecretsDir, BakeSecrets: req.BakeSecrets, Images: req.Images})
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, c)
	}
	if len(req.MachineConfigs) > 0 {
		opts, err := req.machineConfigOptions()
		if err != nil {
			t.Fatal(err)
		}
		c, err := machineconfig.Load(ctx, req.MachineConfigs, opts)
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, c)
	}
	cfg, err := model.Merge(cfgs...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// summaryText is the golden file: layers, tree listing, report essentials.
func summaryText(res *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# layers\n")
	for _, l := range res.Layers {
		fmt.Fprintf(&b, "%s %s files=%d %s\n", l.Name, l.Digest, l.Files, l.CreatedBy)
	}
	fmt.Fprintf(&b, "# tree\n%s", listing(res.tree))
	fmt.Fprintf(&b, "# units\n")
	for _, u := range res.Report.Units {
		fmt.Fprintf(&b, "%s written=%t enablement=%q installFrom=%q dropIns=%q links=%q", u.Name, u.Written, u.Enablement, u.InstallFrom, u.DropIns, u.Links)
		if u.StartedBy != "" {
			fmt.Fprintf(&b, " startedBy=%q", u.StartedBy)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "# runtime\n")
	for _, r := range res.Report.Runtime {
		fmt.Fprintf(&b, "%s: %s (%s %s)\n", r.Item, r.Reason, filepath.Base(r.Origin.Document), r.Origin.Field)
	}
	fmt.Fprintf(&b, "# packages %q\n# kernel arguments %q\n# warnings\n", res.Packages, res.KernelArgs)
	for _, w := range res.Report.Warnings {
		fmt.Fprintf(&b, "%s\n", w)
	}
	return b.String()
}

// TestGoldenFixtures renders every real input set and compares the tree,
// the layer digests and the report with testdata/golden/*.txt.
func TestGoldenFixtures(t *testing.T) {
	dir := fixtures.Dir(t)
	for _, c := range fixtureCases() {
		t.Run(c.name, func(t *testing.T) {
			req := c.request(t, dir, &fakeImages{})
			res, err := Render(context.Background(), req)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkAccounted(t, load(t, req), res)
			if len(res.Layers) > 5 || len(res.Layers) == 0 {
				t.Errorf("%d layers", len(res.Layers))
			}
			got := summaryText(res)
			// The golden files must not depend on where the fixtures are.
			got = strings.ReplaceAll(got, dir+string(filepath.Separator), "")
			golden(t, c.name+".txt", got)
		})
	}
}

// TestReproducible renders the largest inputs twice under different
// GOMAXPROCS, TZ, LANG, working directories and path spellings: the layers
// must be byte-identical and the digests stable.
func TestReproducible(t *testing.T) {
	dir := fixtures.Dir(t)
	cases := []fixtureCase{
		{name: "gardener", oscs: []string{"gardener/generated/osc-worker-a-reconcile-full.yaml"}},
		{name: "mco", mcs: []string{"mco/aws/worker"}, pool: "worker"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			render := func(procs int, tz, lang, cwd string, relative bool) *Result {
				t.Helper()
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				t.Setenv("TZ", tz)
				t.Setenv("LANG", lang)
				t.Setenv("LC_ALL", lang)
				t.Chdir(cwd)
				base := dir
				if relative {
					rel, err := filepath.Rel(cwd, dir)
					if err != nil {
						t.Fatal(err)
					}
					base = rel
				}
				res, err := Render(context.Background(), c.request(t, base, &fakeImages{}))
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			a := render(1, "UTC", "C", dir, false)
			b := render(2, "Asia/Kolkata", "de_DE.UTF-8", t.TempDir(), true)
			if len(a.Layers) != len(b.Layers) {
				t.Fatalf("%d vs %d layers", len(a.Layers), len(b.Layers))
			}
			for i := range a.Layers {
				if !bytes.Equal(a.Layers[i].Gzip, b.Layers[i].Gzip) || a.Layers[i].Digest != b.Layers[i].Digest || a.Layers[i].CreatedBy != b.Layers[i].CreatedBy {
					t.Errorf("layer %s differs: %s vs %s", a.Layers[i].Name, a.Layers[i].Digest, b.Layers[i].Digest)
				}
			}
			if a.InputsDigest != b.InputsDigest {
				t.Errorf("inputs digest %s vs %s", a.InputsDigest, b.InputsDigest)
			}
			for i := 0; i < 3; i++ { // map iteration order differs per run
				c := render(2, "UTC", "C", dir, false)
				for j := range a.Layers {
					if !bytes.Equal(a.Layers[j].Gzip, c.Layers[j].Gzip) {
						t.Fatalf("run %d: layer %s differs", i, a.Layers[j].Name)
					}
				}
			}
			// A different epoch changes the layers and the inputs digest.
			req := c.request(t, dir, &fakeImages{})
			req.Epoch = DefaultEpoch.Add(1e9)
			d, err := Render(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if d.Layers[0].Digest == a.Layers[0].Digest || d.InputsDigest == a.InputsDigest {
				t.Error("epoch does not change the output")
			}
		})
	}
}

func TestWriteDir(t *testing.T) {
	res, err := RenderConfig(context.Background(), Request{}, handConfig())
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := res.WriteDir(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(out, "rootfs/usr/libexec/helper"))
		if err != nil || fi.Mode()&os.ModeSetuid == 0 || fi.Mode().Perm() != 0o755 {
			t.Errorf("setuid helper: %v %v", fi.Mode(), err)
		}
		if tg, err := os.Readlink(filepath.Join(out, "rootfs/etc/systemd/system/rpm-ostreed-automatic.timer")); err != nil || tg != "/dev/null" {
			t.Errorf("mask link: %q %v", tg, err)
		}
		if fi, err := os.Stat(filepath.Join(out, "rootfs/etc/kubernetes/manifests")); err != nil || fi.Mode().Perm() != 0o750 {
			t.Errorf("dir mode: %v", err)
		}
		a, _ := os.Stat(filepath.Join(out, "rootfs/usr/libexec/helper"))
		b, _ := os.Stat(filepath.Join(out, "rootfs/usr/libexec/helper2"))
		if a == nil || b == nil || !os.SameFile(a, b) {
			t.Error("hard link not unpacked as a hard link")
		}
		for i, l := range res.Layers {
			got, err := os.ReadFile(filepath.Join(out, "layers", fmt.Sprintf("%02d-%s.tar.gz", i+1, l.Name)))
			if err != nil || !bytes.Equal(got, l.Gzip) {
				t.Errorf("layer %s: %v", l.Name, err)
			}
		}
		var back Result
		raw, err := os.ReadFile(filepath.Join(out, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		if back.InputsDigest != res.InputsDigest || len(back.Report.Baked) != len(res.Report.Baked) || len(back.Layers) != 3 {
			t.Errorf("report.json round trip: %+v", back)
		}
	}
	check()
	// A second render replaces the previous one.
	if err := res.WriteDir(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	check()
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 1 {
		t.Errorf("leftovers: %v", ents)
	}
	// A non-empty directory that is not a render is never replaced.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "precious"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteDir(context.Background(), other); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("WriteDir over a foreign dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(other, "precious")); err != nil {
		t.Fatal(err)
	}
}

// TestWriteDirReplacesOnlyItsOwn: a directory that merely holds a file
// named report.json (or a forged, different marker) is not a render, and
// is left alone with an error naming it.
func TestWriteDirReplacesOnlyItsOwn(t *testing.T) {
	res, err := RenderConfig(context.Background(), Request{}, handConfig())
	if err != nil {
		t.Fatal(err)
	}
	for name, files := range map[string]map[string]string{
		"report.json":   {"report.json": "{}", "thesis.tex": "years of work"},
		"forged marker": {OutputMarker: "mine", "thesis.tex": "years of work"},
		"marker dir":    {OutputMarker + "/x": "", "thesis.tex": "years of work"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "home")
			for f, body := range files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := res.WriteDir(context.Background(), dir)
			if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "refusing") {
				t.Fatalf("got %v, want an error naming %s", err, dir)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "thesis.tex")); err != nil || string(b) != "years of work" {
				t.Fatalf("foreign file changed: %q %v", b, err)
			}
			if ents, _ := os.ReadDir(filepath.Dir(dir)); len(ents) != 1 {
				t.Errorf("leftovers beside the output: %v", ents)
			}
		})
	}
	// An empty directory is filled, and the next render replaces it.
	dir := t.TempDir()
	for range 2 {
		if err := res.WriteDir(context.Background(), dir); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, OutputMarker)); err != nil || len(b) == 0 {
		t.Fatalf("marker: %q %v", b, err)
	}
}

// TestWriteDirSweepsKilledRuns: the temporary directory of a killed write
// (no process holds its lock) is removed by the next write; one a live
// writer holds is left alone.
func TestWriteDirSweepsKilledRuns(t *testing.T) {
	res, err := RenderConfig(context.Background(), Request{}, handConfig())
	if err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	dead := filepath.Join(parent, ".out"+tmpInfix+"123")
	live := filepath.Join(parent, ".out"+tmpInfix+"456")
	for _, d := range []string{dead, live} {
		if err := os.MkdirAll(filepath.Join(d, "rootfs", "ro"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(d, "rootfs", "ro"), 0o555); err != nil {
			t.Fatal(err)
		}
	}
	// Left by a version before the lock: removed once an hour old.
	legacyOld := filepath.Join(parent, ".out"+legacyTmpInfix+"789")
	legacyNew := filepath.Join(parent, ".out"+legacyTmpInfix+"790")
	for _, d := range []string{legacyOld, legacyNew} {
		if err := os.MkdirAll(filepath.Join(d, "rootfs"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hourAgo := time.Now().Add(-legacyAge - time.Minute)
	if err := os.Chtimes(legacyOld, hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
	l, err := lockDir(live)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.WriteDir(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("killed run's temp dir not swept: %v", err)
	}
	if _, err := os.Stat(legacyOld); !os.IsNotExist(err) {
		t.Errorf("an earlier version's hour-old temp dir not swept: %v", err)
	}
	if _, err := os.Stat(legacyNew); err != nil {
		t.Errorf("an earlier version's recent temp dir removed: %v", err)
	}
	removeAll(legacyNew)
	if _, err := os.Stat(live); err != nil {
		t.Errorf("live run's temp dir removed: %v", err)
	}
	l.Close()
	removeAll(live)
	// A cancelled write leaves nothing behind and keeps the old output.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := res.WriteDir(ctx, out); err == nil {
		t.Fatal("cancelled write succeeded")
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 1 || ents[0].Name() != "out" {
		t.Errorf("after a cancelled write: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(out, "report.json")); err != nil {
		t.Error(err)
	}
}

// BenchmarkRender renders the largest Gardener fixture (imageRef files read
// through a fake reader returning 1 MiB each) and the aws worker
// MachineConfig set.
func BenchmarkRender(b *testing.B) {
	dir := fixtures.Dir(b)
	for _, c := range []fixtureCase{
		{name: "gardener-reconcile-full", oscs: []string{"gardener/generated/osc-worker-a-reconcile-full.yaml"}},
		{name: "mco-aws-worker", mcs: []string{"mco/aws/worker"}, pool: "worker"},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := c.request(b, dir, &fakeImages{size: 1 << 20})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Render(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRenderConfig is BenchmarkRender without decoding: placement,
// tree, tar, gzip, manifest and report only.
func BenchmarkRenderConfig(b *testing.B) {
	dir := fixtures.Dir(b)
	for _, c := range []fixtureCase{
		{name: "gardener-reconcile-full", oscs: []string{"gardener/generated/osc-worker-a-reconcile-full.yaml"}},
		{name: "mco-aws-worker", mcs: []string{"mco/aws/worker"}, pool: "worker"},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := c.request(b, dir, &fakeImages{size: 1 << 20})
			cfg := load(b, req)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := RenderConfig(context.Background(), req, cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
