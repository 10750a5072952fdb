// Package bench measures oslayer against its peers in one run on one
// machine, with a loopback registry and a synthetic Fedora CoreOS-shaped
// base (51 gzip layers):
//
//   - oslayer build --push of one pool, the same with unchanged inputs,
//     and 10 and 100 pools as parallel invocations (-bench.parallel at once);
//   - crane append of the same layer tar onto the same base (the fast-path peer);
//   - buildah bud (vfs, chroot) of FROM base + COPY rootfs/ /, then buildah push
//     (what OpenShift's on-cluster build pod does);
//   - first, the base index: the first build on the base reads every base
//     layer once (wall time of the index phase, bytes read, the process's
//     peak RSS), then builds on the same base from the disk cache and from
//     the artifact next to the image, which read no base layer
//     (-bench.index-only stops there).
//
// For each it prints wall time, bytes downloaded and uploaded (counted by a
// proxy in front of the registry) and peak RSS (from the process's rusage),
// then the ratios oslayer/crane and buildah/oslayer. Run it with
// test/bench/run.sh; nothing here asserts a time.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/oslayerbin"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

var (
	scale    = flag.Float64("bench.scale", 0.02, "synthetic base size as a fraction of a real FCOS image (697 MB); see -bench.gb")
	gb       = flag.Bool("bench.gb", false, "use a ~1 GB base (scale 1.5)")
	pools    = flag.Int("bench.pools", 100, "largest pool count (runs 10 and this many; fewer than 10 runs this many only)")
	parallel = flag.Int("bench.parallel", 8, "oslayer invocations at once for the multi-pool runs")
	buildah  = flag.Bool("bench.buildah", true, "run the buildah peer")
	mdOut    = flag.String("bench.md", "", "also write the result table as markdown to this file")
	reps     = flag.Int("bench.reps", 5, "repetitions of the single-pool runs (oslayer and crane); the median is reported")
	onlyIdx  = flag.Bool("bench.index-only", false, "measure the base index runs only")
	regBin   = flag.String("bench.registry", "", "registry program (\"\" means Debian's docker-registry 2.8; \"registry\" is distribution v3, built by test/setup.sh)")
	regDir   = flag.String("bench.registry-dir", "", "directory the registry's storage is made in (\"\" means the benchmark's temp dir)")
	regQuiet = flag.Bool("bench.registry-quiet", false, "the registry logs warnings only, without its access log")
	files    = flag.Int("bench.files", 60000, "also index an ostree-shaped base (objects and hardlinks, as ostree-ext writes) with this many files, about as many as Fedora CoreOS has; 0 skips it")
)

// run is one measured command (or group of commands).
type run struct {
	name     string
	wall     time.Duration
	up, down int64
	rss      int64 // peak RSS in KiB (max over the group)
	cpu      time.Duration
	// regCPU is the registry's CPU time, proxyCPU the benchmark
	// process's own (the counting proxy, mostly), during the run.
	regCPU, proxyCPU time.Duration
}

// env holds what every measurement shares.
type env struct {
	t       testing.TB
	dir     string
	oslayer string
	proxy   *regtest.Proxy
	reg     *regtest.Registry
	base    string // proxy/fcos/base@sha256:...
	mu      sync.Mutex
	cpu     time.Duration // user+sys of the measured processes
}

// exec runs one command and returns its wall time and peak RSS (KiB).
func (e *env) exec(name string, args []string, extraEnv ...string) (time.Duration, int64) {
	e.t.Helper()
	return e.execOut(io.Discard, name, args, extraEnv...)
}

// execOut is exec with the command's stdout written to stdout.
func (e *env) execOut(stdout io.Writer, name string, args []string, extraEnv ...string) (time.Duration, int64) {
	e.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	var stderr strings.Builder
	cmd.Stdout = stdout
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		e.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	wall := time.Since(start)
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	e.mu.Lock()
	e.cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	e.mu.Unlock()
	return wall, ru.Maxrss
}

// measure runs f with the proxy counters reset and records bytes.
func (e *env) measure(name string, f func() (time.Duration, int64)) run {
	e.proxy.Reset()
	e.mu.Lock()
	e.cpu = 0
	e.mu.Unlock()
	reg0, self0 := e.reg.CPU(), selfCPU()
	wall, rss := f()
	up, down := e.proxy.Bytes()
	return run{name: name, wall: wall, up: up, down: down, rss: rss, cpu: e.cpu,
		regCPU: e.reg.CPU() - reg0, proxyCPU: selfCPU() - self0}
}

// median runs f reps times (f gets the repetition number) and keeps the
// run with the median wall time.
func (e *env) median(name string, f func(i int) (time.Duration, int64)) run {
	var rs []run
	for i := 0; i < max(*reps, 1); i++ {
		rs = append(rs, e.measure(name, func() (time.Duration, int64) { return f(i) }))
	}
	sort.Slice(rs, func(a, b int) bool { return rs[a].wall < rs[b].wall })
	return rs[len(rs)/2]
}

// selfCPU is the user+system CPU time of this process so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// newEnv builds the oslayer binary under test (measured as a process like
// its peers), starts a registry on disk behind a counting proxy and pushes
// the synthetic base (-bench.scale) to it. It returns the base image and
// the repository root.
func newEnv(b *testing.B) (*env, v1.Image, string) {
	regtest.Require(b, "docker-registry")
	dir := b.TempDir()
	e := &env{t: b, dir: dir}
	root, err := fixtures.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	e.oslayer = oslayerbin.Path(b)
	e.reg = regtest.Start(b, regtest.Config{Filesystem: true, StorageDir: *regDir, Quiet: *regQuiet, Binary: *regBin})
	e.proxy = regtest.NewProxy(b, e.reg.Host)
	img, err := synth.FCOSBase(*scale)
	if err != nil {
		b.Fatal(err)
	}
	baseDigest, err := synth.Push(context.Background(), img, e.proxy.Host+"/fcos/base:stable")
	if err != nil {
		b.Fatal(err)
	}
	e.base = baseDigest.String()
	return e, img, root
}

func BenchmarkPeers(b *testing.B) {
	if *gb {
		*scale = 1.5
	}
	crane := regtest.Require(b, "crane")
	e, img, root := newEnv(b)
	dir := e.dir
	baseSize := int64(0)
	if m, err := img.Manifest(); err == nil {
		for _, l := range m.Layers {
			baseSize += l.Size
		}
	}

	osc := filepath.Join(root, "examples", "gardener", "worker-osc.yaml")
	b.ResetTimer()
	var runs []run

	// Base indexes go to a cache of this run only.
	cacheEnv := baseindex.CacheEnv + "=" + filepath.Join(dir, "baseindex")
	// build builds pool from its worker OSC (osc, or the pool's copy of
	// it) and the extra OSCs.
	build := func(pool, poolOSC, target string, extra ...string) (time.Duration, int64) {
		args := []string{"build", "--base", e.base, "--pool", pool, "--osc", poolOSC, "--push", target}
		for _, x := range extra {
			args = append(args, "--osc", x)
		}
		return e.exec(e.oslayer, args, "SOURCE_DATE_EPOCH=1700000000", cacheEnv)
	}
	idx := e.indexRuns(osc, cacheEnv, img)
	if *onlyIdx {
		b.StopTimer()
		fmt.Print(idx)
		if *mdOut != "" {
			if err := os.WriteFile(*mdOut, []byte(idx), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	runs = append(runs, e.median(fmt.Sprintf("oslayer build+push, 1 pool (median of %d)", *reps), func(i int) (time.Duration, int64) {
		return build("worker", osc, fmt.Sprintf("%s/pools/worker-%d:latest", e.proxy.Host, i))
	}))
	runs = append(runs, e.median(fmt.Sprintf("oslayer, unchanged inputs (median of %d)", *reps), func(i int) (time.Duration, int64) {
		return build("worker", osc, e.proxy.Host+"/pools/worker-0:latest")
	}))

	// Multi-pool: parallel invocations, each pool with its own content (its
	// worker OSC, labelled for the pool as Gardener labels each pool's, and
	// a second OSC adding a per-pool file), each pushed to its own
	// repository.
	manyPools := func(n int) run {
		for i := 0; i < n; i++ {
			writePoolOSC(b, dir, i)
			writePoolWorkerOSC(b, osc, dir, i)
		}
		r := e.measure(fmt.Sprintf("oslayer, %d pools (%d parallel invocations)", n, *parallel), func() (time.Duration, int64) {
			return e.parallelRuns(n, func(i int) (time.Duration, int64) {
				pool := fmt.Sprintf("pool%03d", i)
				return build(pool, filepath.Join(dir, "pools", pool+"-worker.yaml"), fmt.Sprintf("%s/pools/%s:latest", e.proxy.Host, pool),
					filepath.Join(dir, "pools", pool+".yaml"))
			})
		})
		return r
	}
	runs = append(runs, manyPools(min(10, *pools)))
	if *pools > 10 {
		runs = append(runs, manyPools(*pools))
	}

	// The same content as a plain tar, for the peers.
	rendered := filepath.Join(dir, "rendered")
	e.exec(e.oslayer, []string{"render", "--osc", osc, "--pool", "worker", "--output-dir", rendered})
	layerTar := filepath.Join(dir, "layer.tar")
	if out, err := exec.Command("tar", "--sort=name", "--owner=0", "--group=0", "--numeric-owner",
		"-C", filepath.Join(rendered, "rootfs"), "-cf", layerTar, ".").CombinedOutput(); err != nil {
		b.Fatalf("tar: %v\n%s", err, out)
	}

	runs = append(runs, e.median(fmt.Sprintf("crane append, same layer tar (median of %d)", *reps), func(i int) (time.Duration, int64) {
		return e.exec(crane, []string{"append", "-b", e.base, "-f", layerTar, "-t", fmt.Sprintf("%s/crane/worker-%d:latest", e.proxy.Host, i)})
	}))

	if *buildah {
		bah := regtest.Require(b, "buildah")
		ctxDir := filepath.Join(dir, "buildctx")
		if err := os.MkdirAll(ctxDir, 0o755); err != nil {
			b.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", filepath.Join(rendered, "rootfs"), filepath.Join(ctxDir, "rootfs")).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v\n%s", err, out)
		}
		if err := os.WriteFile(filepath.Join(ctxDir, "Containerfile"), []byte("FROM "+e.base+"\nCOPY rootfs/ /\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		store := []string{"--root", filepath.Join(dir, "bh-root"), "--runroot", filepath.Join(dir, "bh-runroot"), "--storage-driver", "vfs"}
		target := e.proxy.Host + "/buildah/worker:latest"
		runs = append(runs, e.measure("buildah bud (vfs, chroot) + push", func() (time.Duration, int64) {
			w1, r1 := e.exec(bah, append(append([]string{}, store...), "bud", "--isolation", "chroot", "--tls-verify=false", "--pull-always", "-t", target, ctxDir))
			w2, r2 := e.exec(bah, append(append([]string{}, store...), "push", "--tls-verify=false", target))
			return w1 + w2, max(r1, r2)
		}))
		// Leave no vfs copies behind.
		_ = exec.Command(bah, append(append([]string{}, store...), "rmi", "--all", "--force")...).Run()
	}
	b.StopTimer()

	report(b, runs, baseSize, idx)
}

// buildJSON is what the index runs read from build -o json.
type buildJSON struct {
	Phases []struct {
		Name    string
		Seconds float64
	}
	BaseIndex struct {
		Source    string
		Entries   int
		BytesRead int64
	}
}

// indexSeconds is the wall time of the base-index phase.
func (b *buildJSON) indexSeconds() float64 {
	for _, p := range b.Phases {
		if p.Name == "base-index" {
			return p.Seconds
		}
	}
	return 0
}

// jsonBuild measures one oslayer build -o json of base into target.
func (e *env) jsonBuild(name, base, osc, target, cacheEnv string) (run, *buildJSON) {
	e.t.Helper()
	var out bytes.Buffer
	r := e.measure(name, func() (time.Duration, int64) {
		return e.execOut(&out, e.oslayer, []string{"build", "--base", base, "--pool", "worker", "--osc", osc,
			"--push", target, "-o", "json"}, "SOURCE_DATE_EPOCH=1700000000", cacheEnv)
	})
	res := &buildJSON{}
	if err := json.Unmarshal(out.Bytes(), res); err != nil {
		e.t.Fatalf("%s: %v\n%s", name, err, out.String())
	}
	return r, res
}

// indexRuns measures the base index: the first build on the base (which
// indexes it), then a build into another repository with the disk cache,
// then one into the first repository with an empty cache (the artifact).
// It returns the markdown section.
func (e *env) indexRuns(osc, cacheEnv string, img v1.Image) string {
	e.t.Helper()
	m, err := img.Manifest()
	if err != nil {
		e.t.Fatal(err)
	}
	var baseBytes int64
	for _, l := range m.Layers {
		baseBytes += l.Size
	}
	layerGets := func(m *v1.Manifest) int {
		n := 0
		for _, r := range e.proxy.Requests() {
			for _, l := range m.Layers {
				if r.Method == "GET" && strings.HasSuffix(r.Path, "/blobs/"+l.Digest.String()) {
					n++
				}
			}
		}
		return n
	}
	baseGets := func() int { return layerGets(m) }
	var s strings.Builder
	fmt.Fprintf(&s, "\nbase index of the synthetic FCOS base (%d layers, %.1f MB compressed)\n\n", len(m.Layers), float64(baseBytes)/1e6)
	fmt.Fprintf(&s, "| run | index phase | base layer GETs | base bytes read | downloaded | build wall | build CPU (user+sys) | build peak RSS |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, tc := range []struct{ name, target, env string }{
		{"first build on the base (indexes it)", "/pools/index-a:latest", cacheEnv},
		{"second build, disk cache", "/pools/index-b:latest", cacheEnv},
		{"second build, empty cache: artifact next to the image", "/pools/index-a:latest", baseindex.CacheEnv + "=" + filepath.Join(e.dir, "baseindex-empty")},
	} {
		r, res := e.jsonBuild(tc.name, e.base, osc, e.proxy.Host+tc.target, tc.env)
		fmt.Fprintf(&s, "| %s | %.3f s (%s) | %d | %s | %s | %.3f s | %.3f s | %.1f MB |\n", tc.name, res.indexSeconds(), res.BaseIndex.Source,
			baseGets(), human(res.BaseIndex.BytesRead), human(r.down), r.wall.Seconds(), r.cpu.Seconds(), float64(r.rss)/1024)
	}
	if *files > 0 {
		ost, err := synth.OstreeBase(*files, 50)
		if err != nil {
			e.t.Fatal(err)
		}
		od, err := synth.Push(context.Background(), ost, e.proxy.Host+"/fcos/ostree:stable")
		if err != nil {
			e.t.Fatal(err)
		}
		r, res := e.jsonBuild("ostree base", od.String(), osc, e.proxy.Host+"/pools/index-ostree:latest", cacheEnv)
		phase := res.indexSeconds()
		om, err := ost.Manifest()
		if err != nil {
			e.t.Fatal(err)
		}
		fmt.Fprintf(&s, "| first build on an ostree-shaped base: %d files as objects + hardlinks, %d layers, %d paths indexed | %.3f s (built) | %d | %s | %s | %.3f s | %.3f s | %.1f MB |\n",
			*files, len(om.Layers), res.BaseIndex.Entries, phase, layerGets(om), human(res.BaseIndex.BytesRead), human(r.down), r.wall.Seconds(), r.cpu.Seconds(), float64(r.rss)/1024)
	}
	s.WriteString("\ntargets: index ≤ 10 s, peak RSS ≤ 256 MB; later builds read 0 base bytes\n")
	return s.String()
}

func writePoolOSC(t testing.TB, dir string, i int) {
	t.Helper()
	pool := fmt.Sprintf("pool%03d", i)
	p := filepath.Join(dir, "pools", pool+".yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	osc := fmt.Sprintf(`apiVersion: extensions.gardener.cloud/v1alpha1
kind: OperatingSystemConfig
metadata:
  name: bench-%s
  namespace: shoot--bench--pools
spec:
  type: coreos
  purpose: reconcile
  files:
  - path: /etc/oslayer-bench/pool
    permissions: 420
    content:
      inline:
        data: %q
`, pool, pool+"\n")
	if err := os.WriteFile(p, []byte(osc), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writePoolWorkerOSC writes pools/poolNNN-worker.yaml: the worker OSC at
// osc as Gardener gives it for pool poolNNN (its name, its
// worker.gardener.cloud/pool label and the kubelet's node label name the
// pool), so that a build of poolNNN accepts it.
func writePoolWorkerOSC(t testing.TB, osc, dir string, i int) {
	t.Helper()
	pool := fmt.Sprintf("pool%03d", i)
	data, err := os.ReadFile(osc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, r := range []struct{ old, new string }{
		{"name: gardener-node-agent-worker\n", "name: gardener-node-agent-" + pool + "\n"},
		{"worker.gardener.cloud/pool: worker\n", "worker.gardener.cloud/pool: " + pool + "\n"},
		{"worker.gardener.cloud/pool=worker", "worker.gardener.cloud/pool=" + pool},
	} {
		if !strings.Contains(s, r.old) {
			t.Fatalf("%s: no %q to make it pool %s's OSC", osc, strings.TrimSpace(r.old), pool)
		}
		s = strings.ReplaceAll(s, r.old, r.new)
	}
	p := filepath.Join(dir, "pools", pool+"-worker.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func report(b *testing.B, runs []run, baseSize int64, extra string) {
	var s strings.Builder
	fmt.Fprintf(&s, "\nbase: synthetic FCOS, 51 gzip layers, %.1f MB compressed (scale %g)\n\n", float64(baseSize)/1e6, *scale)
	fmt.Fprintf(&s, "| run | wall | CPU (user+sys) | downloaded | uploaded | peak RSS |\n|---|---:|---:|---:|---:|---:|\n")
	find := func(prefix string) (run, bool) {
		for _, r := range runs {
			if strings.HasPrefix(r.name, prefix) {
				return r, true
			}
		}
		return run{}, false
	}
	for _, r := range runs {
		fmt.Fprintf(&s, "| %s | %.3f s | %.3f s | %s | %s | %.1f MB |\n", r.name, r.wall.Seconds(), r.cpu.Seconds(), human(r.down), human(r.up), float64(r.rss)/1024)
	}
	one := runs[0]
	if c, ok := find("crane append"); ok && c.wall > 0 {
		fmt.Fprintf(&s, "\noslayer/crane (wall, 1 pool; target ≤ 1.3): %.2f", one.wall.Seconds()/c.wall.Seconds())
	}
	if bh, ok := find("buildah bud"); ok && one.wall > 0 {
		fmt.Fprintf(&s, "\nbuildah/oslayer (wall, 1 pool; target ≥ 100): %.1f", bh.wall.Seconds()/one.wall.Seconds())
	}
	s.WriteString("\n")
	s.WriteString(extra)
	fmt.Print(s.String())
	if *mdOut != "" {
		if err := os.WriteFile(*mdOut, []byte(s.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func human(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
