package bench

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/test/regtest"
)

var (
	fleetClusters = flag.Int("bench.fleet-clusters", 100, "clusters in the fleet plan (one repository each)")
	fleetPools    = flag.Int("bench.fleet-pools", 10, "pools per cluster")
	fleetJobs     = flag.Int("bench.fleet-jobs", 16, "oslayer fleet build --jobs")
	fleetSample   = flag.Int("bench.fleet-sample", 0, "pools built as separate oslayer build processes and crane appends, scaled to the fleet (0: every pool)")
	fleetRepos    = flag.String("bench.fleet-repos", "cluster", "a repository per \"cluster\" (a tag per pool) or per \"pool\"")
	fleetSigned   = flag.Bool("bench.fleet-signed", true, "also build the plan signed (a key of the run) into new repositories, then again unchanged")
	fleetPeers    = flag.Bool("bench.fleet-peers", true, "measure the peers (separate oslayer build processes and crane append)")
)

// fleetTarget is the plan's target in the repositories under prefix: a
// repository per cluster and a tag per pool, or (-bench.fleet-repos pool)
// a repository per pool.
func fleetTarget(host, prefix string) string {
	if *fleetRepos == "pool" {
		return fmt.Sprintf("%s/%s/{cluster}-{pool}:latest", host, prefix)
	}
	return fmt.Sprintf("%s/%s/{cluster}:{pool}", host, prefix)
}

// BenchmarkFleet measures oslayer fleet build of clusters × pools (each
// pool with content of its own; a repository per cluster, a tag per pool)
// on the synthetic FCOS-shaped base, then the same plan unchanged, then
// with every pool changed (one more file in each OSC), and compares it in the same run with separate oslayer build processes and
// crane append (-bench.parallel at once) of a sample of the pools, scaled
// to the fleet's size. Run it with test/bench/run.sh -bench.fleet.
func BenchmarkFleet(b *testing.B) {
	crane := regtest.Require(b, "crane")
	if *fleetRepos != "cluster" && *fleetRepos != "pool" {
		b.Fatalf("-bench.fleet-repos %q: want cluster or pool", *fleetRepos)
	}
	e, _, _ := newEnv(b)
	dir := e.dir

	// The plan: every pool has its own OSC (a unit, a drop-in and files).
	// The signed plan is the same pools, signed, into other repositories.
	n := *fleetClusters * *fleetPools
	keyFile := filepath.Join(dir, "keys", "cosign.key")
	const keyPassword = "bench"
	var plan, changedPlan, signedPlan strings.Builder
	for _, p := range []*strings.Builder{&plan, &changedPlan} {
		fmt.Fprintf(p, "defaults:\n  base: %s\n  target: %q\nclusters:\n", e.base, fleetTarget(e.proxy.Host, "fleet"))
	}
	fmt.Fprintf(&signedPlan, "defaults:\n  base: %s\n  target: %q\n  signKey: %s\nclusters:\n", e.base, fleetTarget(e.proxy.Host, "signed"), keyFile)
	type poolRef struct{ cluster, pool, osc string }
	var refs []poolRef
	for c := 0; c < *fleetClusters; c++ {
		cluster := fmt.Sprintf("c%03d", c)
		fmt.Fprintf(&plan, "- name: %s\n  pools:\n", cluster)
		fmt.Fprintf(&changedPlan, "- name: %s\n  pools:\n", cluster)
		fmt.Fprintf(&signedPlan, "- name: %s\n  pools:\n", cluster)
		for p := 0; p < *fleetPools; p++ {
			pool := fmt.Sprintf("p%d", p)
			osc := filepath.Join(dir, "osc", cluster, pool+".yaml")
			writeFleetOSC(b, osc, cluster, pool, false)
			fmt.Fprintf(&plan, "  - {name: %s, osc: [%s]}\n", pool, osc)
			fmt.Fprintf(&signedPlan, "  - {name: %s, osc: [%s]}\n", pool, osc)
			refs = append(refs, poolRef{cluster, pool, osc})
			// The same pool with one more file, for the changed run.
			changedOSC := filepath.Join(dir, "osc-changed", cluster, pool+".yaml")
			writeFleetOSC(b, changedOSC, cluster, pool, true)
			fmt.Fprintf(&changedPlan, "  - {name: %s, osc: [%s]}\n", pool, changedOSC)
		}
	}
	planFile := filepath.Join(dir, "fleet.yaml")
	changedPlanFile := filepath.Join(dir, "fleet-changed.yaml")
	signedPlanFile := filepath.Join(dir, "fleet-signed.yaml")
	for f, p := range map[string]*strings.Builder{planFile: &plan, changedPlanFile: &changedPlan, signedPlanFile: &signedPlan} {
		if err := os.WriteFile(f, []byte(p.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cacheEnv := baseindex.CacheEnv + "=" + filepath.Join(dir, "baseindex")
	epoch := "SOURCE_DATE_EPOCH=1700000000"
	// The base index is made once before the measurements, as a previous
	// build on the base would have (its cost is in BenchmarkPeers).
	e.exec(e.oslayer, []string{"build", "--base", e.base, "--pool", refs[0].pool, "--osc", refs[0].osc,
		"--push", e.proxy.Host + "/warm/up:latest"}, epoch, cacheEnv)
	passEnv := "COSIGN_PASSWORD=" + keyPassword
	if *fleetSigned {
		e.exec(e.oslayer, []string{"keygen", "--output-dir", filepath.Dir(keyFile)}, passEnv)
	}

	b.ResetTimer()
	loadBefore := loadavg()
	var breakdown strings.Builder
	fleetRun := func(name, planFile string) (run, int, fleetSummary) {
		sumFile := filepath.Join(dir, "summary.json")
		r := e.measure(name, func() (time.Duration, int64) {
			return e.exec(e.oslayer, []string{"fleet", "build", planFile, "--jobs", fmt.Sprint(*fleetJobs), "--summary", sumFile}, epoch, cacheEnv, passEnv)
		})
		reqs := len(e.proxy.Requests())
		pings := 0
		for _, r := range e.proxy.Requests() {
			if r.Path == "/v2/" || r.Path == "/v2" {
				pings++
			}
		}
		fmt.Fprintf(&breakdown, "\n%s: %d requests, %d of them pings; per pool by kind: %s\n", name, reqs, pings, requestKinds(e.proxy.Requests(), n))
		var s fleetSummary
		data, err := os.ReadFile(sumFile)
		if err == nil {
			err = json.Unmarshal(data, &s)
		}
		if err != nil || s.Built != n {
			b.Fatalf("%s: built %d of %d: %v", name, s.Built, n, err)
		}
		return r, reqs, s
	}
	first, firstReqs, _ := fleetRun(fmt.Sprintf("oslayer fleet build, %d pools (%d clusters × %d), --jobs %d", n, *fleetClusters, *fleetPools, *fleetJobs), planFile)
	again, againReqs, _ := fleetRun("oslayer fleet build, the same plan unchanged", planFile)
	changed, changedReqs, _ := fleetRun("oslayer fleet build, the same plan with every pool changed", changedPlanFile)
	var signed, signedAgain run
	var signedReqs, signedAgainReqs int
	if *fleetSigned {
		signed, signedReqs, _ = fleetRun("oslayer fleet build, the plan signed (new repositories)", signedPlanFile)
		signedAgain, signedAgainReqs, _ = fleetRun("oslayer fleet build, the signed plan unchanged", signedPlanFile)
	}
	if !*fleetPeers {
		b.StopTimer()
	}

	// The peers on a sample, into repositories of their own.
	var sep, cr run
	var sepReqs int
	sample := n
	if *fleetSample > 0 {
		sample = min(*fleetSample, n)
	}
	if *fleetPeers {
		sep = e.measure(fmt.Sprintf("separate oslayer build processes, %d pools (%d at once)", sample, *parallel), func() (time.Duration, int64) {
			return e.parallelRuns(sample, func(i int) (time.Duration, int64) {
				r := refs[i]
				return e.exec(e.oslayer, []string{"build", "--base", e.base, "--pool", r.pool, "--osc", r.osc,
					"--push", fmt.Sprintf("%s/sep/%s:%s", e.proxy.Host, r.cluster, r.pool)}, epoch, cacheEnv)
			})
		})
		sepReqs = len(e.proxy.Requests())
		// crane append of one pool's layer (the rendered tree as a tar) per pool.
		rendered := filepath.Join(dir, "rendered")
		e.exec(e.oslayer, []string{"render", "--osc", refs[0].osc, "--pool", refs[0].pool, "--output-dir", rendered})
		layerTar := filepath.Join(dir, "layer.tar")
		if out, err := exec.Command("tar", "--sort=name", "--owner=0", "--group=0", "--numeric-owner",
			"-C", filepath.Join(rendered, "rootfs"), "-cf", layerTar, ".").CombinedOutput(); err != nil {
			b.Fatalf("tar: %v\n%s", err, out)
		}
		cr = e.measure(fmt.Sprintf("crane append, %d pools (%d at once)", sample, *parallel), func() (time.Duration, int64) {
			return e.parallelRuns(sample, func(i int) (time.Duration, int64) {
				r := refs[i]
				return e.exec(crane, []string{"append", "-b", e.base, "-f", layerTar, "-t", fmt.Sprintf("%s/crane/%s-%s:latest", e.proxy.Host, r.cluster, r.pool)})
			})
		})
		b.StopTimer()
	}
	loadAfter := loadavg()

	scaleTo := float64(n) / float64(sample)
	var s strings.Builder
	repos := *fleetClusters
	if *fleetRepos == "pool" {
		repos = n
	}
	fmt.Fprintf(&s, "\nfleet: %d pools (%d clusters × %d pools, distinct content, %d repositories: one per %s) on the synthetic FCOS base (scale %g), loopback registry, %d at once for the peers\n\n",
		n, *fleetClusters, *fleetPools, repos, *fleetRepos, *scale, *parallel)
	fmt.Fprintf(&s, "registry: %s (storage on %s, quiet %t)\n\n", e.reg.Version(), regStorage(), *regQuiet)
	fmt.Fprintf(&s, "load average (1, 5, 15 min) before: %s, after: %s; %d CPUs\n\n", loadBefore, loadAfter, runtime.NumCPU())
	fmt.Fprintf(&s, "| run | wall | CPU (user+sys) | registry CPU | proxy CPU | uploaded | downloaded | requests per pool | peak RSS |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	row := func(r run, reqs, pools int) {
		fmt.Fprintf(&s, "| %s | %.2f s | %.2f s | %.2f s | %.2f s | %s | %s | %.1f | %.1f MB |\n", r.name, r.wall.Seconds(), r.cpu.Seconds(),
			r.regCPU.Seconds(), r.proxyCPU.Seconds(), human(r.up), human(r.down), float64(reqs)/float64(pools), float64(r.rss)/1024)
	}
	row(first, firstReqs, n)
	row(again, againReqs, n)
	row(changed, changedReqs, n)
	if *fleetSigned {
		row(signed, signedReqs, n)
		row(signedAgain, signedAgainReqs, n)
	}
	if !*fleetPeers {
		s.WriteString(breakdown.String())
		fmt.Print(s.String())
		e.writeMD(s.String())
		return
	}
	row(sep, sepReqs, sample)
	row(cr, 0, sample)
	sepScaled := sep.wall.Seconds() * scaleTo
	craneScaled := cr.wall.Seconds() * scaleTo
	fmt.Fprintf(&s, "\nscaled to %d pools (measured %d, × %.0f): separate processes %.1f s, crane append %.1f s\n", n, sample, scaleTo, sepScaled, craneScaled)
	fmt.Fprintf(&s, "separate processes / fleet (wall; target ≥ 10): %.1f\n", sepScaled/first.wall.Seconds())
	fmt.Fprintf(&s, "crane append / fleet (wall): %.1f\n", craneScaled/first.wall.Seconds())
	fmt.Fprintf(&s, "separate processes / fleet (CPU of the measured processes, scaled): %.1f\n", sep.cpu.Seconds()*scaleTo/first.cpu.Seconds())
	all := func(r run) float64 { return (r.cpu + r.regCPU + r.proxyCPU).Seconds() }
	fmt.Fprintf(&s, "separate processes / fleet (CPU of the processes, the registry and the proxy, scaled): %.1f\n", all(sep)*scaleTo/all(first))
	fmt.Fprintf(&s, "targets: %d pools ≤ 20 s (%.2f s), unchanged ≤ 3 s (%.2f s), peak RSS ≤ 512 MB (%.1f MB)\n", n,
		first.wall.Seconds(), again.wall.Seconds(), float64(max(first.rss, again.rss))/1024)
	s.WriteString(breakdown.String())
	fmt.Print(s.String())
	e.writeMD(s.String())
}

// writeMD writes the results to -bench.md, when it is set.
func (e *env) writeMD(s string) {
	if *mdOut != "" {
		if err := os.WriteFile(*mdOut, []byte(s), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
}

// regStorage says where the registry stores blobs.
func regStorage() string {
	if *regDir != "" {
		return *regDir
	}
	return "the benchmark's temp dir"
}

// requestKinds counts requests by method and kind (blob, upload, mount,
// manifest, ping), per pool.
func requestKinds(reqs []regtest.Request, pools int) string {
	count := map[string]int{}
	for _, r := range reqs {
		kind := "other"
		switch {
		case r.Path == "/v2/" || r.Path == "/v2":
			kind = "ping"
		case strings.Contains(r.Query, "mount="):
			kind = "mount"
		case strings.Contains(r.Path, "/blobs/uploads"):
			kind = "upload"
		case strings.Contains(r.Path, "/blobs/"):
			kind = "blob"
		case strings.Contains(r.Path, "/manifests/"):
			kind = "manifest"
		}
		count[r.Method+" "+kind]++
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s %.1f", k, float64(count[k])/float64(pools)))
	}
	return strings.Join(out, ", ")
}

// fleetSummary is what the benchmark reads from --summary.
type fleetSummary struct {
	Built, Failed int
}

// parallelRuns runs f(0..n-1), -bench.parallel at once, and returns the
// wall time and the largest peak RSS.
func (e *env) parallelRuns(n int, f func(i int) (time.Duration, int64)) (time.Duration, int64) {
	start := time.Now()
	var mu sync.Mutex
	var maxRSS int64
	sem := make(chan struct{}, *parallel)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			_, rss := f(i)
			mu.Lock()
			maxRSS = max(maxRSS, rss)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	return time.Since(start), maxRSS
}

// writeFleetOSC writes the OSC of a pool of the fleet benchmark; changed
// adds one more file.
func writeFleetOSC(t testing.TB, path, cluster, pool string, changed bool) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	id := cluster + "-" + pool
	osc := fmt.Sprintf(`apiVersion: extensions.gardener.cloud/v1alpha1
kind: OperatingSystemConfig
metadata:
  name: bench-%[1]s
  namespace: shoot--bench--%[2]s
spec:
  type: coreos
  purpose: reconcile
  units:
  - name: bench-%[1]s.service
    enable: true
    content: |
      [Unit]
      Description=bench unit of %[1]s
      [Service]
      ExecStart=/usr/bin/true %[1]s
      [Install]
      WantedBy=multi-user.target
  files:
  - path: /etc/oslayer-bench/pool
    permissions: 420
    content:
      inline:
        data: %[1]q
  - path: /var/lib/oslayer-bench/%[1]s.conf
    permissions: 384
    content:
      inline:
        data: "node pool %[1]s\n"
`, id, cluster)
	if changed {
		osc += fmt.Sprintf(`  - path: /etc/oslayer-bench/changed
    permissions: 420
    content:
      inline:
        data: "changed %s\n"
`, id)
	}
	if err := os.WriteFile(path, []byte(osc), 0o644); err != nil {
		t.Fatal(err)
	}
}
