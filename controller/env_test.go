package controller_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/k8senv"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// The shared test harness of the controller's tests.
//
// One real kube-apiserver and etcd (envtest, the binaries test/setup.sh
// builds) serve every test of the package, with the CRDs of config/crd
// installed, and OpenShift's MachineConfig and MachineConfigPool CRDs
// (test/fixtures/testdata/openshift-crds) and bootc-operator's BootcNodePool
// and BootcNode CRDs (test/fixtures/testdata/bootc-operator); each test gets a namespace of its own, a real registry (on
// disk, so it survives Restart) behind a counting proxy holding the
// synthetic FCOS-shaped base, a cosign key Secret, and (with start) a
// manager running the reconciler that watches only that namespace.
//
//	e := start(t)                  // API server, namespace, registry, manager
//	e := newEnv(t); e.runManager(t, func(o *controller.ManagerOptions) {...})
//
// e.c is a client with the controller's scheme, e.cfg the API server's
// admin config (for clients of other schemes or impersonation), e.logs
// what the managers logged.

// kube is the package's API server, started by the first test that needs
// it and stopped by TestMain.
var kube = &k8senv.Shared{
	Dirs: []string{filepath.Join("..", "config", "crd"),
		filepath.Join("..", "test", "fixtures", "testdata", "openshift-crds"),
		filepath.Join("..", "test", "fixtures", "testdata", "bootc-operator")},
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := kube.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
	}
	os.Exit(code)
}

// kubeConfig starts the shared API server (once) and returns its admin
// config; it skips the test without the binaries (fails with
// OSLAYER_REQUIRE_KUBE=1).
func kubeConfig(t *testing.T) *rest.Config {
	t.Helper()
	return kube.Config(t)
}

// env is one test's view of the harness.
type env struct {
	cfg   *rest.Config
	c     client.Client
	reg   *regtest.Registry
	proxy *regtest.Proxy
	base  string // the base image, through the proxy
	host  string // the proxy's host: targets under it are counted
	pub   []byte // the cosign public key of Secret "cosign"
	// password is the cosign key's password: a value no log, status or
	// Event may show.
	password string
	ns       string
	logs     *syncBuffer
	ctx      context.Context
}

var namespaces atomic.Int32

// newEnv is the API server, a fresh namespace, the registry with the base
// and the cosign Secret, without a manager.
func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, kubeConfig(t))
}

// newEnvOn is newEnv on the API server of cfg.
func newEnvOn(t *testing.T, cfg *rest.Config) *env {
	t.Helper()
	// e.ctx (the managers, the played pods) lasts as long as the test,
	// however slow a loaded machine makes it, until shortly before go
	// test's timeout: a fixed bound here stopped the manager of a test
	// still running, which then waited for Jobs nobody would create.
	deadline := time.Now().Add(time.Hour)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)
	reg, proxy := baseRegistry(ctx, t, regtest.Config{Filesystem: true})
	c := newClient(t, cfg)
	pw := make([]byte, 12)
	if _, err := rand.Read(pw); err != nil {
		t.Fatal(err)
	}
	password := "pw-" + hex.EncodeToString(pw)
	kp, err := sign.GenerateKeyPair([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	ns := fmt.Sprintf("t%d-%s", namespaces.Add(1), name)
	if len(ns) > 63 {
		ns = strings.TrimRight(ns[:63], "-")
	}
	e := &env{cfg: cfg, c: c, reg: reg, proxy: proxy, base: proxy.Host + "/fcos/base:stable", host: proxy.Host,
		pub: kp.Public, password: password, ns: ns, logs: &syncBuffer{}, ctx: ctx}
	e.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cosign", Namespace: e.ns},
		Data: map[string][]byte{sign.SecretKeyField: kp.Private, sign.SecretPasswordField: []byte(password)}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller log (last 8 KiB):\n%s", e.logs.tail(8<<10))
		}
		// The API server outlives the test: its PoolImages go, so a
		// manager of a later test watching every namespace does not build
		// them against this test's stopped registry.
		if err := c.DeleteAllOf(context.Background(), &v1alpha1.PoolImage{}, client.InNamespace(ns)); err != nil {
			t.Errorf("deleting the PoolImages of %s: %v", ns, err)
		}
	})
	return e
}

// newClient is a client of cfg with the controller's scheme.
func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	s, err := controller.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// baseRegistry is a docker-registry holding the synthetic FCOS-shaped
// base at fcos/base:stable, and a counting proxy in front of it.
func baseRegistry(ctx context.Context, t *testing.T, c regtest.Config) (*regtest.Registry, *regtest.Proxy) {
	t.Helper()
	reg := regtest.Start(t, c)
	proxy := regtest.NewProxy(t, reg.Host)
	img, err := synth.FCOSBase(0.0002)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Push(ctx, img, reg.Host+"/fcos/base:stable"); err != nil {
		t.Fatal(err)
	}
	return reg, proxy
}

// start is newEnv with a manager running the reconciler.
func start(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.runManager(t, nil)
	return e
}

// runManager starts a manager (the reconciler, probes and metrics off
// unless mutate sets them) watching the test's namespace, logging into
// e.logs. stop stops it and waits; it also runs when the test ends.
func (e *env) runManager(t *testing.T, mutate func(*controller.ManagerOptions)) (stop func()) {
	t.Helper()
	return e.runManagerAs(t, e.cfg, mutate)
}

// runManagerAs is runManager with another config (another user).
func (e *env) runManagerAs(t *testing.T, cfg *rest.Config, mutate func(*controller.ManagerOptions)) (stop func()) {
	t.Helper()
	o := controller.ManagerOptions{
		Options: controller.Options{Version: "test", IndexCacheDir: t.TempDir(),
			Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		MetricsAddr: "0", ProbeAddr: "0",
		Namespaces:         []string{e.ns},
		SkipNameValidation: true,
	}
	if mutate != nil {
		mutate(&o)
	}
	mgr, err := controller.NewManager(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("manager: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("manager did not stop within 30 s")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// freeAddr is a free 127.0.0.1 address for a manager's metrics or probes.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (e *env) create(t *testing.T, o client.Object) {
	t.Helper()
	if err := e.c.Create(context.Background(), o); err != nil {
		t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

// poolImage is a PoolImage in the test's namespace building the base
// into the proxy's os/NAME:latest, signed with Secret "cosign".
func (e *env) poolImage(name string, src v1alpha1.Source) *v1alpha1.PoolImage {
	return &v1alpha1.PoolImage{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: v1alpha1.PoolImageSpec{
			Source:  src,
			Base:    e.base,
			Target:  e.host + "/os/" + name + ":latest",
			Signing: &v1alpha1.Signing{KeySecret: v1alpha1.LocalObjectReference{Name: "cosign"}},
		},
	}
}

// oscSecret is the Secret gardener-node-agent reads: the OSC under
// data key osc.yaml, with one file of the given content.
func oscSecret(body string) map[string][]byte {
	files := fmt.Sprintf("  - path: /etc/oslayer/pool.conf\n    permissions: 420\n    content:\n      inline:\n        data: %q\n", body)
	return map[string][]byte{"osc.yaml": []byte(synth.OSCFiles(files))}
}

func (e *env) get(t *testing.T, name string) *v1alpha1.PoolImage {
	t.Helper()
	var pi v1alpha1.PoolImage
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &pi); err != nil {
		t.Fatal(err)
	}
	return &pi
}

// waitBound bounds every wait for the controller (a build, a Job): long
// enough for a build on a loaded machine, short enough to fail a stuck
// test well before go test's timeout.
const waitBound = 3 * time.Minute

// until waits until ok holds: it checks now and again after every change
// the API server's watch of list (with opts) reports, for at most
// waitBound; then it fails the test with what state says.
func (e *env) until(t *testing.T, list client.ObjectList, opts []client.ListOption, ok func() bool, state func() string) {
	t.Helper()
	s, err := controller.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := client.NewWithWatch(e.cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, waitBound)
	defer cancel()
	for {
		// The watch starts before the check: a change after the check
		// is an event of the watch.
		w, err := wc.Watch(ctx, list, opts...)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("not within %s: %s", waitBound, state())
			}
			t.Fatalf("watch: %v", err)
		}
		if ok() {
			w.Stop()
			return
		}
		for open := true; open; {
			select {
			case _, open = <-w.ResultChan(): // closed: the API server ended the watch, start another
				if open && ok() {
					w.Stop()
					return
				}
			case <-ctx.Done():
				w.Stop()
				t.Fatalf("not within %s: %s", waitBound, state())
			}
		}
	}
}

// wait waits until ok says so of the PoolImage (at most waitBound).
func (e *env) wait(t *testing.T, name, what string, ok func(*v1alpha1.PoolImage) bool) *v1alpha1.PoolImage {
	t.Helper()
	var pi *v1alpha1.PoolImage
	e.until(t, &v1alpha1.PoolImageList{}, []client.ListOption{client.InNamespace(e.ns), client.MatchingFields{"metadata.name": name}},
		func() bool { pi = e.get(t, name); return ok(pi) },
		func() string {
			if pi == nil {
				return "PoolImage " + name + ": never read"
			}
			return fmt.Sprintf("PoolImage %s: no %s; status %+v", name, what, pi.Status)
		})
	return pi
}

func (e *env) updateSecret(t *testing.T, name string, f func(*corev1.Secret)) {
	t.Helper()
	var s corev1.Secret
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	f(&s)
	if err := e.c.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
}

func ready(pi *v1alpha1.PoolImage) bool {
	return meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionReady)
}

func degraded(pi *v1alpha1.PoolImage) bool {
	return meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionDegraded)
}

// verify checks the image's signature with the key of Secret "cosign"
// (sign.Verify, what oslayer verify runs).
func (e *env) verify(t *testing.T, image string) {
	t.Helper()
	pub, err := sign.ParsePublicKey("cosign.pub", e.pub)
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.Verify(context.Background(), image, pub, sign.WithRegistry(&registry.Options{}))
	if err != nil {
		t.Fatalf("verify %s: %v", image, err)
	}
	if v == nil {
		t.Fatalf("verify %s: no verification", image)
	}
}

// syncBuffer is a log sink several goroutines write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) tail(n int) string {
	s := b.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}
