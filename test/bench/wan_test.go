package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/oslayerbin"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

var (
	wanRTT      = flag.Duration("bench.wan-rtt", 30*time.Millisecond, "round trip the latency proxy adds between the clients and the registries")
	wanLayers   = flag.Int("bench.wan-layers", 400, "layers of the rechunked synthetic base")
	wanFleet    = flag.Int("bench.wan-fleet", 300, "pools of the fleet runs (0 skips them)")
	wanPerClust = flag.Int("bench.wan-fleet-pools", 3, "pools per cluster in the fleet runs")
	wanReps     = flag.Int("bench.wan-reps", 3, "repetitions of the single-build cases; the median is reported")
	wanSweep    = flag.String("bench.wan-sweep", "", "round trips (\"0,10ms,30ms,100ms\") of a sweep of the tag-in-the-base's-repository case, written as CSV to -bench.wan-csv")
	wanCSV      = flag.String("bench.wan-csv", "", "file the sweep's CSV is written to")
	wanSingle   = flag.Bool("bench.wan-single", true, "run the single-build cases (false: the fleet runs only)")
	wanDump     = flag.Bool("bench.wan-dump", false, "list the requests of each oslayer build of fewer than 50")
)

// wanSide is one registry behind a counting proxy behind a latency proxy.
type wanSide struct {
	reg   *regtest.Registry
	count *regtest.Proxy
	lat   *regtest.Latency
	// baseRepo holds the base.
	baseRepo string
}

func newWANSide(b *testing.B, rtt time.Duration, baseRepo string) *wanSide {
	reg := regtest.Start(b, regtest.Config{Quiet: true})
	count := regtest.NewProxy(b, reg.Host)
	return &wanSide{reg: reg, count: count, lat: regtest.NewLatency(b, count.Host, rtt), baseRepo: baseRepo}
}

// wanEnv is what the WAN cases share: the oslayer binary, crane, the
// registry of the target (and of the base) and another registry holding
// the same base, the pool inputs and the layer tar crane appends.
type wanEnv struct {
	b          *testing.B
	dir        string
	oslayer    string
	crane      string
	tgt, other *wanSide
	baseDigest string
	osc        string
	layerTar   string
	cacheEnv   string
	pool       int
}

// BenchmarkWAN measures oslayer build (a fresh process per build, as a CI
// job runs it) and crane append of the same file onto a rechunked base of
// -bench.wan-layers layers in Debian's docker-registry behind a proxy that
// adds -bench.wan-rtt per round trip; requests are counted at the registry.
// Nothing here asserts a time: it prints a table (and -bench.md).
func BenchmarkWAN(b *testing.B) {
	e := newWANEnv(b, *wanRTT)
	load := loadavg()
	b.ResetTimer()
	var rows []wanRow
	if *wanSingle {
		rows = append(rows, e.firstBuild())
		rows = append(rows, e.single("changed pool, tag in the base's repository", "fcos/base:%s", true)...)
		rows = append(rows, e.unchanged())
		rows = append(rows, e.single("changed pool, a new repository", "pools/%s:latest", true)...)
		rows = append(rows, e.otherRegistry()...)
	} else {
		// The fleet builds on an indexed base, as after a first build.
		e.firstBuild()
	}
	if *wanFleet > 0 {
		rows = append(rows, e.fleet("fleet, one repository (a tag per pool)", "fleet-one/pools:{cluster}-{pool}"))
		rows = append(rows, e.fleet("fleet, a repository per cluster", "fleet-cluster/{cluster}:{pool}"))
	}
	b.StopTimer()
	out := wanReport(rows, load)
	if *wanSweep != "" {
		out += e.sweep()
	}
	fmt.Print(out)
	if *mdOut != "" {
		if err := os.WriteFile(*mdOut, []byte(out), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func newWANEnv(b *testing.B, rtt time.Duration) *wanEnv {
	regtest.Require(b, "docker-registry")
	e := &wanEnv{b: b, dir: b.TempDir(), oslayer: oslayerbin.Path(b), crane: regtest.Require(b, "crane")}
	e.tgt, e.other = newWANSide(b, rtt, "fcos/base"), newWANSide(b, rtt, "mirror/fcos")
	img, err := synth.ChunkahBase(*wanLayers)
	if err != nil {
		b.Fatal(err)
	}
	// The base goes in without the latency (it was there before); in the
	// other registry under a repository name the target's registry does
	// not have (a mount request naming it cannot succeed there).
	for _, s := range []*wanSide{e.tgt, e.other} {
		d, err := synth.Push(context.Background(), img, s.reg.Host+"/"+s.baseRepo+":next")
		if err != nil {
			b.Fatal(err)
		}
		e.baseDigest = d.DigestStr()
	}
	root, err := fixtures.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	e.osc = filepath.Join(root, "examples", "gardener", "worker-osc.yaml")
	e.cacheEnv = baseindex.CacheEnv + "=" + filepath.Join(e.dir, "baseindex")
	e.layerTar = e.renderTar()
	return e
}

// renderTar renders the worker pool and tars its tree: the file crane
// appends.
func (e *wanEnv) renderTar() string {
	rendered := filepath.Join(e.dir, "rendered")
	e.run(nil, e.oslayer, "render", "--osc", e.osc, "--pool", "worker", "--output-dir", rendered)
	tarFile := filepath.Join(e.dir, "layer.tar")
	if out, err := exec.Command("tar", "--sort=name", "--owner=0", "--group=0", "--numeric-owner",
		"-C", filepath.Join(rendered, "rootfs"), "-cf", tarFile, ".").CombinedOutput(); err != nil {
		e.b.Fatalf("tar: %v\n%s", err, out)
	}
	return tarFile
}

// run runs one command and returns its wall time.
func (e *wanEnv) run(env []string, name string, args ...string) time.Duration {
	e.b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000"), env...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		e.b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return time.Since(start)
}

// base is the base by digest in side s, as clients reach it.
func (e *wanEnv) base(s *wanSide) string { return s.lat.Host + "/" + s.baseRepo + "@" + e.baseDigest }

// newPool writes the inputs of a pool of its own (changed content) and
// returns its name and the build's --osc arguments.
func (e *wanEnv) newPool() (string, []string) {
	i := e.pool
	e.pool++
	writePoolOSC(e.b, e.dir, i)
	writePoolWorkerOSC(e.b, e.osc, e.dir, i)
	pool := fmt.Sprintf("pool%03d", i)
	return pool, []string{"--osc", filepath.Join(e.dir, "pools", pool+"-worker.yaml"), "--osc", filepath.Join(e.dir, "pools", pool+".yaml")}
}

// build runs oslayer build of pool onto base into target (in side s) and
// measures it at s's registry.
func (e *wanEnv) build(s *wanSide, base, pool string, oscs []string, target string, env ...string) wanMeasure {
	args := append([]string{"build", "--base", base, "--pool", pool, "--push", s.lat.Host + "/" + target}, oscs...)
	return e.measure(s, func() time.Duration { return e.run(append([]string{e.cacheEnv}, env...), e.oslayer, args...) })
}

// crane runs crane append of the layer tar onto base into target.
func (e *wanEnv) craneAppend(s *wanSide, base, target string) wanMeasure {
	return e.measure(s, func() time.Duration {
		return e.run(nil, e.crane, "append", "-b", base, "-f", e.layerTar, "-t", s.lat.Host+"/"+target)
	})
}

// wanMeasure is one measured run: wall time and the requests the
// registry of the target saw.
type wanMeasure struct {
	wall time.Duration
	reqs []regtest.Request
	// baseGets are GETs of blobs at the base's registry when it is
	// another one.
	otherReqs []regtest.Request
}

func (e *wanEnv) measure(s *wanSide, f func() time.Duration) wanMeasure {
	e.tgt.count.Reset()
	e.other.count.Reset()
	w := f()
	m := wanMeasure{wall: w, reqs: s.count.Requests()}
	if s == e.tgt {
		m.otherReqs = e.other.count.Requests()
	} else {
		m.otherReqs = e.tgt.count.Requests()
	}
	return m
}

// median runs f reps times and keeps the median wall time.
func median(f func() wanMeasure) wanMeasure {
	var ms []wanMeasure
	for range max(*wanReps, 1) {
		ms = append(ms, f())
	}
	sort.Slice(ms, func(a, b int) bool { return ms[a].wall < ms[b].wall })
	return ms[len(ms)/2]
}

// wanRow is one line of the table: oslayer and (when measured) crane.
type wanRow struct {
	name     string
	pools    int
	os, peer wanMeasure
	hasPeer  bool
}

// firstBuild is the first build on the base with an empty index cache and
// no published index: it reads the base's layers.
func (e *wanEnv) firstBuild() wanRow {
	pool, oscs := e.newPool()
	m := e.build(e.tgt, e.base(e.tgt), pool, oscs, "first/"+pool+":latest")
	return wanRow{name: "first build on the base (index), a new repository", pools: 1, os: m}
}

// single measures a changed pool into target (a format taking the pool)
// and crane append of the same file next to it.
func (e *wanEnv) single(name, target string, peer bool) []wanRow {
	os := median(func() wanMeasure {
		pool, oscs := e.newPool()
		return e.build(e.tgt, e.base(e.tgt), pool, oscs, fmt.Sprintf(target, pool))
	})
	row := wanRow{name: name, pools: 1, os: os}
	if peer {
		row.hasPeer = true
		row.peer = median(func() wanMeasure {
			e.pool++
			return e.craneAppend(e.tgt, e.base(e.tgt), fmt.Sprintf(target, fmt.Sprintf("crane%03d", e.pool)))
		})
	}
	return []wanRow{row}
}

// unchanged rebuilds one pool with the same inputs into the same tag.
func (e *wanEnv) unchanged() wanRow {
	pool, oscs := e.newPool()
	target := "fcos/base:" + pool
	e.build(e.tgt, e.base(e.tgt), pool, oscs, target)
	m := median(func() wanMeasure { return e.build(e.tgt, e.base(e.tgt), pool, oscs, target) })
	return wanRow{name: "unchanged rebuild (base by digest)", pools: 1, os: m}
}

// otherRegistry builds onto the base in the other registry into a new
// repository of the target's.
func (e *wanEnv) otherRegistry() []wanRow {
	os := median(func() wanMeasure {
		pool, oscs := e.newPool()
		return e.build(e.tgt, e.base(e.other), pool, oscs, "pools/"+pool+":latest")
	})
	peer := median(func() wanMeasure {
		e.pool++
		return e.craneAppend(e.tgt, e.base(e.other), fmt.Sprintf("crane/other%03d:latest", e.pool))
	})
	return []wanRow{{name: "base in another registry, a new repository", pools: 1, os: os, peer: peer, hasPeer: true}}
}

// fleet runs oslayer fleet build of -bench.wan-fleet pools (each with
// content of its own) into target (with {cluster} and {pool}).
func (e *wanEnv) fleet(name, target string) wanRow {
	n, per := *wanFleet, max(*wanPerClust, 1)
	var plan strings.Builder
	fmt.Fprintf(&plan, "defaults:\n  base: %s\n  target: %q\nclusters:\n", e.base(e.tgt), e.tgt.lat.Host+"/"+target)
	for c := 0; c*per < n; c++ {
		cluster := fmt.Sprintf("c%03d", c)
		fmt.Fprintf(&plan, "- name: %s\n  pools:\n", cluster)
		for p := 0; p < per && c*per+p < n; p++ {
			pool := fmt.Sprintf("p%d", p)
			osc := filepath.Join(e.dir, "wanfleet", cluster, pool+".yaml")
			writeFleetOSC(e.b, osc, cluster, pool, false)
			fmt.Fprintf(&plan, "  - {name: %s, osc: [%s]}\n", pool, osc)
		}
	}
	f := filepath.Join(e.dir, "wanfleet-"+strings.NewReplacer("/", "-", "{", "", "}", "", ":", "-").Replace(target)+".yaml")
	if err := os.WriteFile(f, []byte(plan.String()), 0o644); err != nil {
		e.b.Fatal(err)
	}
	m := e.measure(e.tgt, func() time.Duration {
		return e.run([]string{e.cacheEnv}, e.oslayer, "fleet", "build", f, "--jobs", "16")
	})
	return wanRow{name: fmt.Sprintf("%s, %d pools", name, n), pools: n, os: m}
}

// kindsOf summarizes requests by kind.
func kindsOf(reqs []regtest.Request) string {
	return strings.Join(regtest.Tally(reqs, wanKind), ", ")
}

func wanKind(r regtest.Request) string {
	switch {
	case r.Path == "/v2/" || r.Path == "/v2":
		return "ping"
	case strings.Contains(r.Query, "mount="):
		return fmt.Sprintf("mount %d", r.Status)
	case strings.Contains(r.Path, "/blobs/uploads"):
		return r.Method + " upload"
	case strings.Contains(r.Path, "/blobs/"):
		return r.Method + " blob"
	case strings.Contains(r.Path, "/manifests/"):
		return r.Method + " manifest"
	case strings.Contains(r.Path, "/tags/list"):
		return "tags/list"
	}
	return "other"
}

func wanReport(rows []wanRow, load string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "\nWAN: %v round trip, rechunked base of %d layers, Debian's docker-registry, a fresh process per build; load before: %s\n\n", *wanRTT, *wanLayers, load)
	s.WriteString("| build | oslayer | requests (per pool) | crane append | requests | crane/oslayer |\n|---|---:|---:|---:|---:|---:|\n")
	var kinds strings.Builder
	for _, r := range rows {
		peer, ratio, preqs := "—", "—", "—"
		if r.hasPeer {
			peer = fmt.Sprintf("%.2f s", r.peer.wall.Seconds())
			preqs = fmt.Sprint(len(r.peer.reqs))
			ratio = fmt.Sprintf("%.1f×", r.peer.wall.Seconds()/r.os.wall.Seconds())
		}
		fmt.Fprintf(&s, "| %s | %.2f s | %d (%d) | %s | %s | %s |\n", r.name, r.os.wall.Seconds(), len(r.os.reqs), len(r.os.reqs)/max(r.pools, 1), peer, preqs, ratio)
		fmt.Fprintf(&kinds, "- %s: oslayer: %s", r.name, kindsOf(r.os.reqs))
		if len(r.os.otherReqs) > 0 {
			fmt.Fprintf(&kinds, "; at the other registry: %s", kindsOf(r.os.otherReqs))
		}
		if r.hasPeer {
			fmt.Fprintf(&kinds, "; crane: %s", kindsOf(r.peer.reqs))
		}
		kinds.WriteString("\n")
		if *wanDump && len(r.os.reqs) < 50 {
			for _, q := range r.os.reqs {
				fmt.Fprintf(&kinds, "    %s %s %d\n", q.Method, q.Path, q.Status)
			}
		}
	}
	fmt.Fprintf(&s, "\nrequests by kind at the target's registry:\n\n%s\nload after: %s\n", kinds.String(), loadavg())
	return s.String()
}

// sweep measures the tag-in-the-base's-repository case (oslayer and crane
// append) at each round trip of -bench.wan-sweep, writes the CSV to
// -bench.wan-csv and returns it as a markdown table.
func (e *wanEnv) sweep() string {
	var csv strings.Builder
	csv.WriteString("rtt_ms,oslayer_s,oslayer_requests,crane_s,crane_requests\n")
	for _, f := range strings.Split(*wanSweep, ",") {
		f = strings.TrimSpace(f)
		if f == "0" {
			f = "0s"
		}
		rtt, err := time.ParseDuration(f)
		if err != nil {
			e.b.Fatalf("-bench.wan-sweep %q: %v", *wanSweep, err)
		}
		e.tgt.lat.SetRTT(rtt)
		e.other.lat.SetRTT(rtt)
		row := e.single("sweep", "fcos/base:%s", true)[0]
		fmt.Fprintf(&csv, "%g,%.3f,%d,%.3f,%d\n", float64(rtt)/float64(time.Millisecond), row.os.wall.Seconds(), len(row.os.reqs), row.peer.wall.Seconds(), len(row.peer.reqs))
	}
	e.tgt.lat.SetRTT(*wanRTT)
	e.other.lat.SetRTT(*wanRTT)
	if *wanCSV != "" {
		if err := os.WriteFile(*wanCSV, []byte(csv.String()), 0o644); err != nil {
			e.b.Fatal(err)
		}
	}
	return "\nround-trip sweep, changed pool, tag in the base's repository (CSV):\n\n```\n" + csv.String() + "```\n"
}
