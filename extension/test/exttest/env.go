package exttest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"

	"github.com/oslayer/oslayer/extension/pkg/app"
)

// Type is the OS type the harness's extension serves.
const Type = app.DefaultType

// Env is one test's harness.
type Env struct {
	Cfg    *rest.Config
	Client client.Client
	// Registry is the real registry; Host its host (loopback).
	Registry *regtest.Registry
	Host     string
	// Base is the synthetic base (Host/fcos/base:stable).
	Base string
	// Key is the cosign key pair; every shoot's resource KeyResource (its
	// copy KeySecretCopy in the shoot's namespace) holds it (with
	// Password).
	Key      *sign.KeyPair
	Password string
	// User and UserPassword are the registry's credentials (Options.Registry's;
	// "": no auth).
	User, UserPassword string
	Ctx                context.Context
}

// Options tune the harness.
type Options struct {
	// Scale is the synthetic base's scale (synth.FCOSBase; 0: 0.0002).
	Scale float64
	// Registry configures the registry (Filesystem for large bases).
	Registry regtest.Config
}

// New starts the registry with the base and makes the key; the API
// server is the shared one.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := API(t)
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := regtest.Start(t, o.Registry)
	if o.Scale == 0 {
		o.Scale = 0.0002
	}
	e0 := &Env{User: o.Registry.User, UserPassword: o.Registry.Password}
	img, err := synth.FCOSBase(o.Scale)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Push(ctx, img, reg.Host+"/fcos/base:stable", e0.RegistryAuth()...); err != nil {
		t.Fatal(err)
	}
	const password = "extension-test-password"
	kp, err := sign.GenerateKeyPair([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	e0.Cfg, e0.Client, e0.Registry, e0.Host, e0.Base, e0.Key, e0.Password, e0.Ctx = cfg, c, reg, reg.Host, reg.Host+"/fcos/base:stable", kp, password, ctx
	return e0
}

// RegistryAuth are the remote options that authenticate to the
// registry (none when it has no auth).
func (e *Env) RegistryAuth() []remote.Option {
	if e.User == "" {
		return nil
	}
	return []remote.Option{remote.WithAuth(&authn.Basic{Username: e.User, Password: e.UserPassword})}
}

// StartManager runs the extension's manager (app.NewManager, as the
// binary runs it, without leader election and listeners) until the test
// ends.
func (e *Env) StartManager(t testing.TB, workers int) {
	t.Helper()
	e.StartManagerAs(t, e.Cfg, workers)
}

// StartManagerAs is StartManager with the credentials of cfg.
func (e *Env) StartManagerAs(t testing.TB, cfg *rest.Config, workers int) {
	t.Helper()
	e.StartManagerWith(t, cfg, workers, nil)
}

// StartManagerWith is StartManagerAs with the options changed by opts
// (nil: none), e.g. the default configuration.
func (e *Env) StartManagerWith(t testing.TB, cfg *rest.Config, workers int, opts func(*app.Options)) {
	t.Helper()
	o := app.Options{Type: Type, Workers: workers, MetricsAddr: "0", HealthAddr: "0", Version: "test", SkipNameValidation: true, QPS: 100, Burst: 150,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if opts != nil {
		opts(&o)
	}
	ctx, cancel := context.WithCancel(e.Ctx)
	mgr, err := app.NewManager(ctx, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

var shoots atomic.Int32

// Shoot creates a shoot's namespace (shoot--PROJECT--NAME) with its
// Cluster (the shoot's worker pool of machine image version, its cosign
// key among its resources) and the key Secret as gardenlet copies it into
// the namespace (KeySecretCopy); it returns the namespace.
func (e *Env) Shoot(t testing.TB, pool, version string) string {
	t.Helper()
	name := fmt.Sprintf("s%d", shoots.Add(1))
	ns := "shoot--test--" + name
	e.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"gardener.cloud/role": "shoot"}}})
	e.Create(t, Cluster(ns, "test", name, pool, version))
	e.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: KeySecretCopy, Namespace: ns},
		Data: map[string][]byte{sign.SecretKeyField: e.Key.Private, sign.SecretPasswordField: []byte(e.Password), sign.SecretPublicField: e.Key.Public}})
	// Before the manager stops (cleanups run last first): the OSCs go
	// through the extension's Delete, so that no later test's manager
	// reconciles them against this test's stopped registry.
	t.Cleanup(func() { e.deleteOSCs(t, ns) })
	return ns
}

// deleteOSCs deletes the namespace's OSCs and waits until they are gone.
func (e *Env) deleteOSCs(t testing.TB, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := e.Client.DeleteAllOf(ctx, &extensionsv1alpha1.OperatingSystemConfig{}, client.InNamespace(ns)); err != nil {
		t.Errorf("deleting the OSCs of %s: %v", ns, err)
		return
	}
	var list extensionsv1alpha1.OperatingSystemConfigList
	Until(t, time.Minute, func() bool {
		return e.Client.List(ctx, &list, client.InNamespace(ns)) == nil && len(list.Items) == 0
	}, func() string { return fmt.Sprintf("%d OSCs of %s not deleted", len(list.Items), ns) })
}

// Create creates o, failing the test on error.
func (e *Env) Create(t testing.TB, o client.Object) {
	t.Helper()
	if err := e.Client.Create(e.Ctx, o); err != nil {
		t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

// Catalog is the registry's repositories.
func (e *Env) Catalog(t testing.TB) []string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+e.Host+"/v2/_catalog?n=1000", nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.User != "" {
		req.SetBasicAuth(e.User, e.UserPassword)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the registry's catalog: %s", resp.Status)
	}
	var c struct {
		Repositories []string `json:"repositories"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c.Repositories
}

// Until polls get until ok (every 100 ms, at most timeout), failing the
// test with state() when it never is.
func Until(t testing.TB, timeout time.Duration, ok func() bool, state func() string) {
	t.Helper()
	end := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(end) {
			t.Fatalf("not reached within %s: %s", timeout, state())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
