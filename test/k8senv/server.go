package k8senv

import (
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Shared is an API server the tests of a package share: the first test
// that asks starts it with the CRDs of Dirs, TestMain stops it.
type Shared struct {
	// Dirs are the CRD folders installed at the start.
	Dirs []string

	once sync.Once
	env  *envtest.Environment
	cfg  *rest.Config
	err  error
}

// Config starts the server once and returns a copy of its admin config;
// it skips or fails the test as Assets does.
func (s *Shared) Config(t testing.TB) *rest.Config {
	t.Helper()
	assets := Assets(t)
	s.once.Do(func() {
		s.env = environment(assets, s.Dirs)
		s.cfg, s.err = s.env.Start()
	})
	if s.err != nil {
		t.Fatalf("envtest (kube-apiserver and etcd from %s): %v", assets, s.err)
	}
	return rest.CopyConfig(s.cfg)
}

// Env is the started environment (nil before Config).
func (s *Shared) Env() *envtest.Environment { return s.env }

// Stop stops the server if it was started.
func (s *Shared) Stop() error {
	if s.env == nil {
		return nil
	}
	return s.env.Stop()
}

// Start starts an API server of the test's own with the CRDs of dirs,
// stopped when the test ends.
func Start(t testing.TB, dirs ...string) *rest.Config {
	t.Helper()
	assets := Assets(t)
	env := environment(assets, dirs)
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest (kube-apiserver and etcd from %s): %v", assets, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	return cfg
}

func environment(assets string, dirs []string) *envtest.Environment {
	return &envtest.Environment{CRDDirectoryPaths: dirs, ErrorIfCRDPathMissing: len(dirs) > 0, BinaryAssetsDirectory: assets}
}
