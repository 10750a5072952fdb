// Package exttest is the OS extension's test harness: a real API server
// (envtest, from test/k8senv) with Gardener's own extension CRDs, a real
// registry holding the synthetic base, a cosign key, shoot namespaces
// with their Cluster, OSCs of the extension's type, and the extension's
// manager (Gardener's extension library with oslayer's actuator) running
// against them.
package exttest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gardener/gardener/pkg/component"
	"github.com/gardener/gardener/pkg/component/autoscaling/vpa"
	"github.com/gardener/gardener/pkg/component/extensions/crds"

	"github.com/oslayer/oslayer/test/k8senv"

	"github.com/oslayer/oslayer/extension/pkg/app"
)

var api struct {
	once sync.Once
	env  *envtest.Environment
	cfg  *rest.Config
	err  error
}

// API returns the shared API server of the test binary, with Gardener's
// extension CRDs (as gardenlet deploys them into a seed) installed.
func API(t testing.TB) *rest.Config {
	t.Helper()
	assets := k8senv.Assets(t)
	api.once.Do(func() {
		// The library's and envtest's logs are not the tests' output.
		ctrllog.SetLogger(logr.Discard())
		api.env = &envtest.Environment{BinaryAssetsDirectory: assets}
		if api.cfg, api.err = api.env.Start(); api.err != nil {
			return
		}
		api.err = installCRDs(api.cfg)
	})
	if api.err != nil {
		t.Fatalf("envtest (kube-apiserver and etcd from %s) with Gardener's CRDs: %v", assets, api.err)
	}
	cfg := rest.CopyConfig(api.cfg)
	// The harness polls many OSCs: no client-side rate limit.
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// Stop stops the shared API server (TestMain calls it).
func Stop() {
	if api.env != nil {
		_ = api.env.Stop()
	}
}

// installCRDs deploys Gardener's extension CRDs and the VPA's (a seed
// has both; the chart's VerticalPodAutoscaler needs it) with Gardener's
// own deployers (the CRDs of the pinned Gardener module).
func installCRDs(cfg *rest.Config) error {
	c, err := NewClient(cfg)
	if err != nil {
		return err
	}
	d, err := crds.NewCRD(c, true, true)
	if err != nil {
		return err
	}
	v, err := vpa.NewCRD(c, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, dw := range []component.DeployWaiter{d, v} {
		if err := dw.Deploy(ctx); err != nil {
			return err
		}
		if err := dw.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// NewClient is a client with the extension's scheme.
func NewClient(cfg *rest.Config) (client.Client, error) {
	s, err := app.Scheme()
	if err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// KubeConfig is a kubeconfig of the shared API server for user (a
// process of its own reads it).
func KubeConfig(_ *rest.Config, user envtest.User) ([]byte, error) {
	u, err := api.env.AddUser(user, nil)
	if err != nil {
		return nil, err
	}
	return u.KubeConfig()
}
