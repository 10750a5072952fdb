package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/k8senv"
	"github.com/oslayer/oslayer/test/synth"
)

var (
	ctlChanges = flag.Int("bench.changes", 50, "BenchmarkController: source changes timed one after another")
	ctlPools   = flag.Int("bench.ctl-pools", 100, "BenchmarkController: PoolImages created at once")
	ctlArgs    = flag.String("bench.ctl-args", "", "BenchmarkController: extra oslayer controller flags (space-separated)")
	ctlRepos   = flag.Bool("bench.ctl-repo-per-pool", false, "BenchmarkController: each of the PoolImages created at once pushes into a repository of its own (default: one repository, a tag per pool)")
)

// BenchmarkController measures the build service: the oslayer binary runs
// `oslayer controller` as a process of its own against a real
// kube-apiserver and etcd (envtest), building onto the synthetic FCOS
// base in the loopback registry and signing every image. It times
//
//   - a source change (the OSC Secret of a PoolImage updated) until the
//     PoolImage's status.image names the new, signed and tagged image,
//     -bench.changes times one after another (p50, p95, max);
//   - -bench.ctl-pools PoolImages (each with an OSC Secret of its own and
//     a tag of its own in one repository, as the pools of one cluster;
//     -bench.ctl-repo-per-pool gives each a repository) created at once
//     until all are Ready, with the registry requests per PoolImage;
//
// and reads the controller's peak RSS (VmHWM) and CPU time from /proc.
// The load average is printed with the figures: the machine may be
// shared. Run it with test/bench/run.sh -bench.controller.
func BenchmarkController(b *testing.B) {
	assets := k8senv.Assets(b)
	ctrllog.SetLogger(logr.Discard()) // envtest's own log
	e, _, root := newEnv(b)
	dir := e.dir
	loadBefore := loadavg()

	te := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := te.Start()
	if err != nil {
		b.Fatalf("envtest (kube-apiserver and etcd from %s): %v", assets, err)
	}
	defer func() { _ = te.Stop() }()
	user, err := te.AddUser(envtest.User{Name: "oslayer-controller", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		b.Fatal(err)
	}
	scheme, err := controller.Scheme()
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	const ns = "bench"
	create := func(o client.Object) {
		b.Helper()
		if err := c.Create(ctx, o); err != nil {
			b.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	kp, err := sign.GenerateKeyPair([]byte("bench"))
	if err != nil {
		b.Fatal(err)
	}
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cosign", Namespace: ns},
		Data: map[string][]byte{sign.SecretKeyField: kp.Private, sign.SecretPasswordField: []byte("bench")}})
	poolImage := func(name, target string) *v1alpha1.PoolImage {
		return &v1alpha1.PoolImage{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1alpha1.PoolImageSpec{
				Source:  v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-" + name}},
				Base:    e.base,
				Target:  e.proxy.Host + target,
				Signing: &v1alpha1.Signing{KeySecret: v1alpha1.LocalObjectReference{Name: "cosign"}},
			},
		}
	}

	// The controller, a process of its own.
	args := []string{"controller", "--namespace", ns, "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--base-index-cache", filepath.Join(dir, "baseindex"), "--log-level", "warn"}
	args = append(args, strings.Fields(*ctlArgs)...)
	logFile, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logFile.Close()
	ctl := exec.Command(e.oslayer, args...)
	ctl.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "SOURCE_DATE_EPOCH=1700000000")
	ctl.Stderr = logFile
	if err := ctl.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = ctl.Wait(); close(exited) }()
	defer func() {
		_ = ctl.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = ctl.Process.Kill()
			<-exited
		}
	}()
	fail := func(format string, a ...any) {
		b.Helper()
		log, _ := os.ReadFile(logFile.Name())
		if len(log) > 8<<10 {
			log = log[len(log)-8<<10:]
		}
		b.Fatalf(format+"\ncontroller log (tail):\n%s", append(a, log)...)
	}
	// waitFor watches the namespace's PoolImages from before start() is
	// called until done says all it waits for arrived, and returns the
	// time from start to then.
	waitFor := func(start func(), done func(*v1alpha1.PoolImage) bool) time.Duration {
		b.Helper()
		w, err := c.Watch(ctx, &v1alpha1.PoolImageList{}, client.InNamespace(ns))
		if err != nil {
			b.Fatal(err)
		}
		defer w.Stop()
		t0 := time.Now()
		start()
		timeout := time.After(5 * time.Minute)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					fail("watch of PoolImages ended")
				}
				pi, isPI := ev.Object.(*v1alpha1.PoolImage)
				if isPI && (ev.Type == watch.Added || ev.Type == watch.Modified) && done(pi) {
					return time.Since(t0)
				}
			case <-exited:
				fail("the controller exited: %v", ctl.ProcessState)
			case <-timeout:
				fail("timed out after 5 minutes")
			}
		}
	}
	built := func(pi *v1alpha1.PoolImage, prev string) bool {
		return pi.Status.Image != "" && pi.Status.Image != prev && pi.Status.Signed &&
			meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionReady)
	}
	oscData := func(name string, i int) map[string][]byte {
		files := fmt.Sprintf("  - path: /etc/oslayer-bench/%s\n    permissions: 420\n    content:\n      inline:\n        data: %q\n", name, fmt.Sprint("change ", i, "\n"))
		return map[string][]byte{"osc.yaml": []byte(synth.OSCFiles(files))}
	}

	// The first PoolImage: its build also indexes the base.
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-latency", Namespace: ns}, Data: oscData("latency", 0)})
	var image string
	first := waitFor(func() { create(poolImage("latency", "/pools/latency:latest")) }, func(pi *v1alpha1.PoolImage) bool {
		if pi.Name == "latency" && built(pi, "") {
			image = pi.Status.Image
			return true
		}
		return false
	})
	b.ResetTimer()

	cpu0 := procCPU(b, ctl.Process.Pid)
	lat := make([]time.Duration, 0, *ctlChanges)
	for i := 1; i <= *ctlChanges; i++ {
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "osc-latency"}, &s); err != nil {
			b.Fatal(err)
		}
		s.Data = oscData("latency", i)
		prev := image
		lat = append(lat, waitFor(func() {
			if err := c.Update(ctx, &s); err != nil {
				b.Fatal(err)
			}
		}, func(pi *v1alpha1.PoolImage) bool {
			if pi.Name == "latency" && built(pi, prev) {
				image = pi.Status.Image
				return true
			}
			return false
		}))
	}
	cpuChanges := procCPU(b, ctl.Process.Pid) - cpu0

	// Many PoolImages at once: their Secrets first, then the PoolImages
	// from 8 clients at once.
	n := *ctlPools
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("pool%03d", i)
		create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-" + name, Namespace: ns}, Data: oscData(name, 0)})
	}
	cpu0 = procCPU(b, ctl.Process.Pid)
	e.proxy.Reset()
	var mu sync.Mutex
	readyAt := map[string]bool{}
	var firstReady time.Duration
	var t0 time.Time
	many := waitFor(func() {
		t0 = time.Now()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for i := 0; i < n; i++ {
			wg.Add(1)
			sem <- struct{}{}
			go func(i int) {
				defer wg.Done()
				defer func() { <-sem }()
				name := fmt.Sprintf("pool%03d", i)
				target := "/pools/cluster:" + name
				if *ctlRepos {
					target = "/pools/" + name + ":latest"
				}
				if err := c.Create(ctx, poolImage(name, target)); err != nil {
					b.Error(err)
				}
			}(i)
		}
		wg.Wait()
	}, func(pi *v1alpha1.PoolImage) bool {
		if !strings.HasPrefix(pi.Name, "pool") || !built(pi, "") {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if len(readyAt) == 0 {
			firstReady = time.Since(t0)
		}
		readyAt[pi.Name] = true
		return len(readyAt) == n
	})
	cpuMany := procCPU(b, ctl.Process.Pid) - cpu0
	reqs := e.proxy.Requests()
	b.StopTimer()
	hwm, rss := procMem(b, ctl.Process.Pid)
	loadAfter := loadavg()

	// One image of each phase verifies with the key.
	pub, err := sign.ParsePublicKey("cosign.pub", kp.Public)
	if err != nil {
		b.Fatal(err)
	}
	var last v1alpha1.PoolImage
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("pool%03d", n-1)}, &last); err != nil {
		b.Fatal(err)
	}
	for _, im := range []string{image, last.Status.Image} {
		if v, err := sign.Verify(ctx, im, pub); err != nil || !v.OK() {
			b.Fatalf("verify %s: %v %+v", im, err, v)
		}
	}

	sorted := append([]time.Duration(nil), lat...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	pct := func(p float64) time.Duration { return sorted[min(len(sorted)-1, int(p*float64(len(sorted)-1)+0.5))] }
	var s strings.Builder
	fmt.Fprintf(&s, "\ncontroller: oslayer controller as a process (%s) against kube-apiserver %s + etcd (envtest), loopback registry, synthetic FCOS base (scale %g), every image signed\n",
		strings.Join(args[1:], " "), k8senv.KubeVersion, *scale)
	fmt.Fprintf(&s, "load average (1, 5, 15 min): %s before, %s after; %d CPUs\n\n", loadBefore, loadAfter, numCPU())
	fmt.Fprintf(&s, "| measurement | value | target |\n|---|---:|---:|\n")
	fmt.Fprintf(&s, "| first PoolImage created → Ready (indexes the base) | %.2f s | |\n", first.Seconds())
	fmt.Fprintf(&s, "| source change → status.image signed and tagged, p50 of %d | %.2f s | ≤ 2 s |\n", len(lat), pct(0.5).Seconds())
	fmt.Fprintf(&s, "| source change → status.image, p95 of %d | %.2f s | ≤ 5 s |\n", len(lat), pct(0.95).Seconds())
	fmt.Fprintf(&s, "| source change → status.image, max | %.2f s | |\n", sorted[len(sorted)-1].Seconds())
	fmt.Fprintf(&s, "| controller CPU for the %d changes | %.2f s | |\n", len(lat), cpuChanges.Seconds())
	fmt.Fprintf(&s, "| %d PoolImages created at once → first Ready | %.2f s | |\n", n, firstReady.Seconds())
	fmt.Fprintf(&s, "| %d PoolImages created at once → all Ready | %.2f s | ≤ 30 s |\n", n, many.Seconds())
	fmt.Fprintf(&s, "| controller CPU for the %d PoolImages | %.2f s | |\n", n, cpuMany.Seconds())
	fmt.Fprintf(&s, "| registry requests per PoolImage of the %d | %.1f | |\n", n, float64(len(reqs))/float64(n))
	fmt.Fprintf(&s, "| controller peak RSS (VmHWM) | %.1f MB | ≤ 300 MB |\n", float64(hwm)/1024)
	fmt.Fprintf(&s, "| controller RSS at the end (VmRSS) | %.1f MB | |\n", float64(rss)/1024)
	layout := "one repository, a tag per pool"
	if *ctlRepos {
		layout = "a repository per pool"
	}
	fmt.Fprintf(&s, "\n%d PoolImages (%s): registry requests per PoolImage by kind: %s\n", n, layout, requestKinds(reqs, n))
	fmt.Print(s.String())
	if *mdOut != "" {
		if err := os.WriteFile(*mdOut, []byte(s.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// loadavg is the 1, 5 and 15 minute load average from /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func numCPU() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\nprocessor") + 1
}

// procCPU is the user+system CPU time of process pid so far.
func procCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command (which may hold spaces) in parentheses;
	// utime and stime are fields 14 and 15, in clock ticks (100 a second).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// procMem is the peak and current RSS of process pid in KiB (VmHWM and
// VmRSS of /proc/PID/status).
func procMem(t testing.TB, pid int) (hwm, rss int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			hwm = v
		case "VmRSS:":
			rss = v
		}
	}
	return hwm, rss
}
