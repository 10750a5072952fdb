// Package bench measures the OS extension end to end: the
// oslayer-os-extension binary, a process of its own, reconciles OSCs
// against a real API server (envtest with Gardener's CRDs), building onto
// the synthetic FCOS base in a loopback registry and signing every image.
package bench

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/test/regtest"

	"github.com/oslayer/oslayer/extension/test/exttest"
)

var (
	scale   = flag.Float64("bench.scale", 1.5, "the synthetic base's scale (1.5: about 1 GB)")
	changes = flag.Int("bench.changes", 20, "OSC changes timed one after another")
	oscs    = flag.Int("bench.oscs", 100, "OSCs (one shoot each) created at once")
	workers = flag.Int("bench.workers", 10, "the extension's --max-concurrent-reconciles")
	mdOut   = flag.String("bench.md", "", "also write the figures (markdown) to this file")
	target  = flag.String("bench.target", "/os/{namespace}/{pool}", "the providerConfig's target under the registry host (a repository per shoot and pool; /os/pools:{namespace}-{pool} shares one repository)")
)

func TestMain(m *testing.M) {
	code := m.Run()
	exttest.Stop()
	os.Exit(code)
}

// BenchmarkExtension times, with the extension running as its own
// process:
//
//   - the first OSC (its build also indexes the base);
//   - -bench.changes changes of one OSC, one after another, each from
//     the update until status.lastOperation is Succeeded with the new
//     signed image recorded (p50, p95, max);
//   - -bench.oscs OSCs of as many shoots created at once until all are
//     Succeeded;
//
// and reads the extension's peak RSS (VmHWM) from /proc.
func BenchmarkExtension(b *testing.B) {
	e := exttest.New(b, exttest.Options{Scale: *scale, Registry: regtest.Config{Filesystem: true, Quiet: true}})
	ext := startExtension(b, e)
	cfg := e.Config()
	cfg.Target = e.Host + *target
	ns := e.Shoot(b, "worker", "43.1")
	osc := exttest.OSC(ns, "osc-worker-original", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, cfg, "change 0")
	b.ResetTimer()
	t0 := time.Now()
	e.Create(b, osc)
	image := waitImage(b, e, osc, "", ext)
	first := time.Since(t0)

	var lat []time.Duration
	for i := 1; i <= *changes; i++ {
		t0 := time.Now()
		touch(b, e, osc, fmt.Sprintf("change %d", i))
		image = waitImage(b, e, osc, image, ext)
		lat = append(lat, time.Since(t0))
	}

	many := make([]*extensionsv1alpha1.OperatingSystemConfig, *oscs)
	for i := range many {
		ns := e.Shoot(b, "worker", "43.1")
		many[i] = exttest.OSC(ns, "osc-worker-original", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, cfg, "shoot "+ns)
	}
	cpu0, reg0 := procCPU(b, ext.pid), e.Registry.CPU()
	t0 = time.Now()
	for _, o := range many {
		e.Create(b, o)
	}
	waitAll(b, e, many, ext)
	total := time.Since(t0)
	cpu, regCPU := procCPU(b, ext.pid)-cpu0, e.Registry.CPU()-reg0
	b.StopTimer()
	hwm := procHWM(b, ext.pid)
	report(b, figures{first: first, lat: lat, total: total, cpu: cpu, regCPU: regCPU, hwm: hwm})
}

// figures are what the benchmark measured.
type figures struct {
	first, total, cpu, regCPU time.Duration
	lat                       []time.Duration
	hwm                       int64
}

// report prints (and with -bench.md writes) the figures.
func report(b *testing.B, f figures) {
	first, lat, total, hwm := f.first, f.lat, f.total, f.hwm
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	load, _ := os.ReadFile("/proc/loadavg")
	var s strings.Builder
	fmt.Fprintf(&s, "| extension, base scale %g | figure | target |\n|---|---|---|\n", *scale)
	fmt.Fprintf(&s, "| first OSC (indexes the base) | %s | |\n", first.Round(time.Millisecond))
	fmt.Fprintf(&s, "| one OSC changed, end to end (n=%d) p50 / p95 / max | %s / %s / %s | p50 ≤ 1 s |\n", len(lat),
		pct(0.5).Round(time.Millisecond), pct(0.95).Round(time.Millisecond), pct(1).Round(time.Millisecond))
	fmt.Fprintf(&s, "| %d OSCs (%d shoots × 1 pool) at once, %d workers, target %s | %s | ≤ 30 s |\n", *oscs, *oscs, *workers, *target, total.Round(time.Millisecond))
	fmt.Fprintf(&s, "| extension CPU for the %d OSCs | %s | |\n", *oscs, f.cpu.Round(10*time.Millisecond))
	fmt.Fprintf(&s, "| registry CPU for the %d OSCs | %s | |\n", *oscs, f.regCPU.Round(10*time.Millisecond))
	fmt.Fprintf(&s, "| extension peak RSS (VmHWM) | %.1f MB | ≤ 300 MB |\n", float64(hwm)/1024)
	fmt.Fprintf(&s, "\nload average: %s", load)
	fmt.Print(s.String())
	if *mdOut != "" {
		if err := os.WriteFile(*mdOut, []byte(s.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(pct(0.5).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(pct(0.95).Milliseconds()), "p95-ms")
	b.ReportMetric(total.Seconds(), "oscs-s")
	b.ReportMetric(float64(hwm)/1024, "rss-MB")
}

// extension is the running oslayer-os-extension process.
type extension struct {
	pid    int
	exited chan struct{}
	log    string
}

// startExtension builds the binary and runs it against the API server
// until the benchmark ends.
func startExtension(b *testing.B, e *exttest.Env) *extension {
	b.Helper()
	dir := b.TempDir()
	bin := filepath.Join(dir, "oslayer-os-extension")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/oslayer-os-extension").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	user := envtest.User{Name: "oslayer-os-extension", Groups: []string{"system:masters"}}
	kc, err := exttest.KubeConfig(e.Cfg, user)
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		b.Fatal(err)
	}
	x := &extension{exited: make(chan struct{}), log: filepath.Join(dir, "extension.log")}
	logf, err := os.Create(x.log)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "--leader-election=false", "--metrics-bind-address=0", "--health-bind-address=0",
		"--max-concurrent-reconciles="+strconv.Itoa(*workers), "--index-cache-dir="+filepath.Join(dir, "baseindex"))
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	x.pid = cmd.Process.Pid
	go func() { _ = cmd.Wait(); logf.Close(); close(x.exited) }()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-x.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-x.exited
		}
	})
	return x
}

// procHWM is the peak RSS of process pid in KiB (VmHWM).
func procHWM(b *testing.B, pid int) int64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

// procCPU is the user and system CPU time of process pid.
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command (which may hold spaces) in parentheses.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
