package fleet_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/fleet"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// env is a registry (behind a counting proxy) with the synthetic
// FCOS-shaped base pushed to fcos/base:stable.
type env struct {
	proxy *regtest.Proxy
	host  string // the proxy's host
	base  string
	dir   string
}

// newEnv is env on Debian's docker-registry: for tests that count the
// requests of a run (what a registry answers decides what is sent next)
// or inject faults.
func newEnv(t *testing.T) *env {
	t.Helper()
	return envOn(t, regtest.Start(t, regtest.Config{}))
}

// newMemoryEnv is env on the in-memory registry: for tests of what a run
// builds, shares and signs, not of what it asks a registry.
func newMemoryEnv(t *testing.T) *env {
	t.Helper()
	return envOn(t, regtest.Memory(t))
}

func envOn(t *testing.T, reg *regtest.Registry) *env {
	t.Helper()
	proxy := regtest.NewProxy(t, reg.Host)
	img, err := synth.FCOSBase(0.0002)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Push(ctxT(t), img, reg.Host+"/fcos/base:stable"); err != nil {
		t.Fatal(err)
	}
	return &env{proxy: proxy, host: proxy.Host, base: proxy.Host + "/fcos/base:stable", dir: t.TempDir()}
}

// osc writes a Gardener OSC with one file whose content is body.
func (e *env) osc(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	files := fmt.Sprintf("  - path: /etc/oslayer/%s\n    permissions: 420\n    content:\n      inline:\n        data: %q\n", filepath.Base(name), body)
	if err := os.WriteFile(p, []byte(synth.OSCFiles(files)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) plan(t *testing.T, plan string) []fleet.Pool {
	t.Helper()
	p := filepath.Join(e.dir, "plan.yaml")
	if err := os.WriteFile(p, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	pools, err := fleet.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return pools
}

func (e *env) run(t *testing.T, pools []fleet.Pool) *fleet.Summary {
	t.Helper()
	var progress strings.Builder
	sum, err := fleet.Run(ctxT(t), pools, fleet.Options{Registry: &registry.Options{}, Jobs: 3, Version: "test",
		IndexCacheDir: filepath.Join(e.dir, "cache"), Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(progress.String(), "\n"); n != len(pools) {
		t.Errorf("%d progress lines for %d pools:\n%s", n, len(pools), progress.String())
	}
	return sum
}

// fleetPlan is 2 clusters × 3 pools, each pool with content of its own.
func (e *env) fleetPlan(t *testing.T) []fleet.Pool {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "defaults:\n  base: %s\n  target: %s/os/{cluster}/{pool}:latest\n  preflight: {fatalWarnings: false}\nclusters:\n", e.base, e.host)
	for _, c := range []string{"eu1", "us1"} {
		fmt.Fprintf(&b, "- name: %s\n  pools:\n", c)
		for _, p := range []string{"worker", "infra", "gpu"} {
			e.osc(t, c+"/"+p+".yaml", "content of "+c+"/"+p)
			fmt.Fprintf(&b, "  - name: %s\n    osc: [%s/%s.yaml]\n", p, c, p)
		}
	}
	return e.plan(t, b.String())
}

// TestFleetBuild builds 6 pools against a real registry: each tag names
// the digest the summary reports (checked with crane), the digest is the
// one a single build of the pool gives, the base is resolved once for all
// pools, and an unchanged fleet uploads nothing.
func TestFleetBuild(t *testing.T) {
	crane := regtest.Require(t, "crane")
	e := newEnv(t)
	pools := e.fleetPlan(t)
	sum := e.run(t, pools)
	if sum.Built != 6 || sum.Failed != 0 || sum.ExitCode() != 0 {
		t.Fatalf("built %d, failed %d, exit %d: %+v", sum.Built, sum.Failed, sum.ExitCode(), sum.Pools)
	}
	digests := map[string]bool{}
	for _, p := range sum.Pools {
		out, err := exec.Command(crane, "digest", p.Target).CombinedOutput()
		if err != nil {
			t.Fatalf("crane digest %s: %v\n%s", p.Target, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != p.Digest {
			t.Errorf("%s names %s, summary says %s", p.Target, got, p.Digest)
		}
		if p.InputsDigest == "" || p.BytesUploaded == 0 || len(p.Phases) == 0 || p.BaseDigest == "" {
			t.Errorf("%s: summary incomplete: %+v", p.Path, p)
		}
		digests[p.Digest] = true
	}
	if len(digests) != 6 {
		t.Errorf("%d distinct digests for 6 pools with distinct content", len(digests))
	}
	// The base manifest was read once for the fleet (resolution; the index
	// came from one read of its layers, after a look for its artifact next
	// to the base).
	manifestGets := 0
	for _, r := range e.proxy.Requests() {
		if r.Method == http.MethodGet && strings.HasPrefix(r.Path, "/v2/fcos/base/manifests/") && !strings.HasSuffix(r.Path, ".baseindex") {
			manifestGets++
		}
	}
	if manifestGets != 1 {
		t.Errorf("base manifest read %d times for 6 pools, want 1", manifestGets)
	}
	if len(sum.Shared) != 1 || sum.Shared[0].Pools != 6 || sum.Shared[0].Index != "built" {
		t.Errorf("shared = %+v", sum.Shared)
	}

	// One pool alone, the way oslayer build builds it: the same digest.
	p := pools[4]
	pub, err := publish.New(e.host+"/single/check:latest", &registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := assemble.Build(ctxT(t), assemble.Request{
		Render: render.Request{OSCs: p.OSC, Pool: p.Name}, Base: p.Base, Version: "test",
		Flags: assemble.OutputFlags{Pool: p.Name, Base: p.Base}.Map(),
		Index: assemble.IndexOptions{CacheDir: filepath.Join(e.dir, "cache")},
	}, pub)
	if err != nil {
		t.Fatal(err)
	}
	if res.Digest.String() != sum.Pools[4].Digest {
		t.Errorf("single build %s, fleet %s", res.Digest, sum.Pools[4].Digest)
	}

	e.unchanged(t, pools, sum)
}

// unchanged runs pools again, unchanged since sum: every pool is built
// with the same digest, nothing is uploaded and nothing written.
func (e *env) unchanged(t *testing.T, pools []fleet.Pool, sum *fleet.Summary) {
	t.Helper()
	e.proxy.Reset()
	again := e.run(t, pools)
	if again.Built != len(pools) || again.BytesUploaded != 0 {
		t.Errorf("unchanged fleet: built %d of %d, uploaded %d B", again.Built, len(pools), again.BytesUploaded)
	}
	for _, r := range e.proxy.Requests() {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			t.Errorf("unchanged fleet sent %s %s", r.Method, r.Path)
		}
	}
	for i := range sum.Pools {
		if again.Pools[i].Digest != sum.Pools[i].Digest {
			t.Errorf("%s: digest %s, then %s", sum.Pools[i].Path, sum.Pools[i].Digest, again.Pools[i].Digest)
		}
	}
}

// TestFleetFailuresIsolated: a pool whose content fails preflight, one
// whose input does not render and one whose registry is unreachable fail
// with their step and kind; the other pools are built; the failed pools'
// tags were never written.
func TestFleetFailuresIsolated(t *testing.T) {
	e := newEnv(t)
	e.osc(t, "good.yaml", "fine")
	e.osc(t, "secret.yaml", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\n")
	bad := filepath.Join(e.dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(synth.OSCFiles("  - path: relative/path\n    content: {inline: {data: x}}\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	pools := e.plan(t, fmt.Sprintf(`
defaults: {base: %[1]s, target: "%[2]s/os/{cluster}/{pool}:latest"}
clusters:
- name: c
  pools:
  - {name: good, osc: [good.yaml]}
  - {name: secret, osc: [secret.yaml]}
  - {name: bad, osc: [bad.yaml]}
  - {name: good2, osc: [good.yaml]}
`, e.base, e.host))
	sum := e.run(t, pools)
	want := map[string][2]string{"secret": {"preflight", fleet.KindInput}, "bad": {"render", fleet.KindInput}}
	for _, p := range sum.Pools {
		w, fail := want[p.Pool]
		switch {
		case !fail && p.Status != "built":
			t.Errorf("%s: %s at %s: %s", p.Pool, p.Status, p.Step, p.Error)
		case fail && (p.Status != "failed" || p.Step != w[0] || p.Kind != w[1]):
			t.Errorf("%s: status %s step %q kind %q (%s), want failed at %s (%s)", p.Pool, p.Status, p.Step, p.Kind, p.Error, w[0], w[1])
		}
	}
	if sum.ExitCode() != 2 {
		t.Errorf("exit code %d, want 2 (bad input)", sum.ExitCode())
	}
	for _, r := range e.proxy.Requests() {
		if strings.Contains(r.Path, "/os/c/secret/") || strings.Contains(r.Path, "/os/c/bad/") {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				t.Errorf("failed pool wrote %s %s", r.Method, r.Path)
			}
		}
	}

	// A registry that does not answer, for a target or for an imageRef
	// file: could not run (kind run, at push and at render), exit 1; the
	// pools on the working registry are still built.
	stalled := regtest.Stalled(t)
	imgref := synth.OSCFiles("  - path: /etc/from-image\n    content: {imageRef: {image: " + stalled + "/tools/x:1, filePathInImage: /x}}\n")
	if err := os.WriteFile(filepath.Join(e.dir, "imgref.yaml"), []byte(imgref), 0o644); err != nil {
		t.Fatal(err)
	}
	pools = e.plan(t, fmt.Sprintf(`
defaults: {base: %[1]s}
clusters:
- name: c
  pools:
  - {name: good, osc: [good.yaml], target: "%[2]s/os/c/good:latest"}
  - {name: away, osc: [good.yaml], target: "%[3]s/os/c/away:latest"}
  - {name: imgref, osc: [imgref.yaml], target: "%[2]s/os/c/imgref:latest"}
`, e.base, e.host, stalled))
	sum, err := fleet.Run(ctxT(t), pools, fleet.Options{Registry: &registry.Options{Timeout: 2 * time.Second}, Jobs: 2,
		IndexCacheDir: filepath.Join(e.dir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Pools[0].Status != "built" || sum.Pools[1].Status != "failed" || sum.Pools[1].Kind != fleet.KindRun || sum.ExitCode() != 1 {
		t.Errorf("pools %+v, exit %d", sum.Pools, sum.ExitCode())
	}
	if p := sum.Pools[2]; p.Status != "failed" || p.Step != "render" || p.Kind != fleet.KindRun {
		t.Errorf("imageRef from a registry that does not answer: %s at %q, kind %q (%s); want failed at render, kind run", p.Status, p.Step, p.Kind, p.Error)
	}
}
