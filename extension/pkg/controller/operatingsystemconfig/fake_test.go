package operatingsystemconfig_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"

	"github.com/oslayer/oslayer/extension/pkg/app"
	oscactuator "github.com/oslayer/oslayer/extension/pkg/controller/operatingsystemconfig"
	"github.com/oslayer/oslayer/extension/test/exttest"
)

// fakeEnv is an actuator on controller-runtime's fake client holding one
// shoot's namespace (its Cluster and cosign Secret) and an in-memory
// registry with the synthetic base.
type fakeEnv struct {
	ctx    context.Context
	client client.Client
	act    *oscactuator.Actuator
	host   string
	base   string
	ns     string
	key    *sign.KeyPair
	log    logr.Logger
}

const (
	fakePool    = "worker"
	fakeVersion = "43.1"
	fakePass    = "fake-test-password"
)

func newFakeEnv(t *testing.T, objs ...client.Object) *fakeEnv {
	t.Helper()
	reg := regtest.Memory(t)
	img, err := synth.FCOSBase(0.0002)
	if err != nil {
		t.Fatal(err)
	}
	e := &fakeEnv{ctx: context.Background(), host: reg.Host, ns: "shoot--p--s", log: logr.Discard()}
	e.base = e.host + "/fcos/base:stable"
	if _, err := synth.Push(e.ctx, img, e.base); err != nil {
		t.Fatal(err)
	}
	if e.key, err = sign.GenerateKeyPair([]byte(fakePass)); err != nil {
		t.Fatal(err)
	}
	scheme, err := app.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, exttest.Cluster(e.ns, "p", "s", fakePool, fakeVersion),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: exttest.KeySecretCopy, Namespace: e.ns},
			Data: map[string][]byte{sign.SecretKeyField: e.key.Private, sign.SecretPasswordField: []byte(fakePass), sign.SecretPublicField: e.key.Public}})
	e.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&extensionsv1alpha1.OperatingSystemConfig{}).Build()
	e.act = e.actuator(pipeline.RegistryOptions{Insecure: []string{e.host}})
	return e
}

// actuator is an actuator on the env's client with the registry options.
func (e *fakeEnv) actuator(reg pipeline.RegistryOptions) *oscactuator.Actuator {
	return oscactuator.New(e.client, oscactuator.Options{Version: "test", Registry: reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// osc creates an OSC of the purpose with the providerConfig in the
// env's namespace and returns it as stored.
func (e *fakeEnv) osc(t *testing.T, name string, purpose extensionsv1alpha1.OperatingSystemConfigPurpose, pc any) *extensionsv1alpha1.OperatingSystemConfig {
	t.Helper()
	o := exttest.OSC(e.ns, name, fakePool, purpose, pc, "hello")
	if err := e.client.Create(e.ctx, o); err != nil {
		t.Fatal(err)
	}
	return o
}

// config is a providerConfig onto the env's base and registry, signed
// with the namespace's cosign Secret.
func (e *fakeEnv) config() map[string]any {
	return map[string]any{"apiVersion": "oslayer.os.extensions.gardener.cloud/v1alpha1", "kind": "OperatingSystemConfiguration",
		"base": e.base, "target": e.host + "/os/{namespace}/{pool}", "signing": map[string]any{"keySecretRef": map[string]any{"name": exttest.KeyResource}}}
}

// pipelineInsecure are registry options reaching the hosts over plain
// HTTP.
func pipelineInsecure(hosts ...string) pipeline.RegistryOptions {
	return pipeline.RegistryOptions{Insecure: hosts}
}

// exttestOSC is a reconcile OSC of the env's namespace, not yet created.
func exttestOSC(e *fakeEnv, name string, pc any) *extensionsv1alpha1.OperatingSystemConfig {
	return exttest.OSC(e.ns, name, fakePool, extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, pc, "hello")
}

// create creates o with the providerConfig pc and returns it as stored.
func (e *fakeEnv) create(t *testing.T, o *extensionsv1alpha1.OperatingSystemConfig, pc any) *extensionsv1alpha1.OperatingSystemConfig {
	t.Helper()
	b, err := json.Marshal(pc)
	if err != nil {
		t.Fatal(err)
	}
	o.Spec.ProviderConfig = &runtime.RawExtension{Raw: b}
	if err := e.client.Create(e.ctx, o); err != nil {
		t.Fatal(err)
	}
	return o
}
