package controller_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/test/regtest"
)

// kubeconfigIn is e.kubeconfig with its context's namespace set to ns, as
// kubectl config set-context --current --namespace NS leaves it.
func (e *env) kubeconfigIn(t *testing.T, ns string) string {
	t.Helper()
	p := e.kubeconfig(t)
	kc, err := clientcmd.LoadFromFile(p)
	if err != nil {
		t.Fatal(err)
	}
	c := kc.Contexts[kc.CurrentContext]
	if c == nil {
		t.Fatalf("kubeconfig %s has no current context", p)
	}
	c.Namespace = ns
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// lease is the controller's leader election lease in ns (nil if none).
func (e *env) lease(t *testing.T, ns string) *coordinationv1.Lease {
	t.Helper()
	var l coordinationv1.Lease
	err := e.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: controller.LeaderElectionID}, &l)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	if err != nil {
		return nil
	}
	return &l
}

// TestControllerOutsideCluster runs the real binary as the command's first
// example does (oslayer controller --leader-elect --log-level info
// --log-format json) outside a cluster: a process with a kubeconfig file,
// no service account. The lease goes to the namespace of the kubeconfig's
// context. Before any build the metrics endpoint already has
// oslayer_builds_total and oslayer_build_duration_seconds for both results
// at zero. The controller leads and builds; then SIGTERM, as a rollout
// sends it, stops it in the middle of the next build: exit status 0, no
// ERROR record in its log, the lease released for the next replica, and
// the stopped build recorded nowhere as a failure.
func TestControllerOutsideCluster(t *testing.T) {
	e := newEnv(t)
	bin := oslayerCmd(t)
	p := e.startProcess(t, bin, e.kubeconfigIn(t, e.ns), "example",
		"controller", "--leader-elect", "--log-level", "info", "--log-format", "json", "--namespace", e.ns)
	p.checkProbes(t)

	before := scrape(t, p.metrics)
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"oslayer_builds_total", map[string]string{"result": "succeeded"}},
		{"oslayer_builds_total", map[string]string{"result": "failed"}},
		{"oslayer_build_duration_seconds_count", map[string]string{"result": "succeeded"}},
		{"oslayer_build_duration_seconds_count", map[string]string{"result": "failed"}},
	} {
		if v, ok := metric(before, c.name, c.labels); !ok || v != 0 {
			t.Errorf("before any build: %s%v is %v (exported: %v), want 0", c.name, c.labels, v, ok)
		}
	}

	deadline := time.Now().Add(time.Minute)
	for l := e.lease(t, e.ns); l == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == ""; l = e.lease(t, e.ns) {
		if time.Now().After(deadline) {
			t.Fatalf("no lease %s held in the kubeconfig context's namespace %s within a minute", controller.LeaderElectionID, e.ns)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The registry behind a proxy that stalls the first layer upload
	// once armed: the rollout's SIGTERM comes in the middle of a build.
	faults := regtest.NewFaultProxy(t, e.proxy.Host)
	stalled := make(chan string, 1)
	var armed atomic.Bool
	faults.SetFault(func(r *http.Request) regtest.Fault {
		if (r.Method == http.MethodPatch || r.Method == http.MethodPut) && strings.Contains(r.URL.Path, "/blobs/uploads/") && armed.CompareAndSwap(true, false) {
			stalled <- r.Method + " " + r.URL.Path
			return regtest.Fault{Stall: true}
		}
		return regtest.Fault{}
	})
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("one")})
	pi := e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}})
	pi.Spec.Base, pi.Spec.Target = faults.Host+"/fcos/base:stable", faults.Host+"/os/worker:latest"
	e.create(t, pi)
	first := e.wait(t, "worker", "Ready", ready)

	armed.Store(true)
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("two") })
	select {
	case req := <-stalled:
		t.Logf("SIGTERM while the build uploads a layer (%s)", req)
	case <-time.After(waitBound):
		t.Fatalf("no build of the change within %s", waitBound)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatal("no exit within a minute of SIGTERM")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
	for _, line := range strings.Split(p.log.String(), "\n") {
		var rec struct{ Level string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == "ERROR" {
			t.Errorf("logged an error on a clean stop: %s", line)
		}
	}
	if l := e.lease(t, e.ns); l == nil || (l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "") {
		t.Errorf("lease after the stop: %+v, want it released", l)
	}
	// The stopped build is no failed build: no record, no Degraded.
	if pi := e.get(t, "worker"); degraded(pi) || len(pi.Status.Builds) != 1 || pi.Status.Image != first.Status.Image {
		t.Errorf("after a stop mid-build: %+v, want the first build's status", pi.Status)
	}
}
