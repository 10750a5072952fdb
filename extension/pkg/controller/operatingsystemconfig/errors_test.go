package operatingsystemconfig_test

import (
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/test/regtest"

	"github.com/oslayer/oslayer/extension/test/exttest"
)

// codes are the Gardener error codes of err (the library reads them the
// same way into status.lastError.codes).
func codes(err error) []gardencorev1beta1.ErrorCode {
	var c interface {
		Codes() []gardencorev1beta1.ErrorCode
	}
	if errors.As(err, &c) {
		return c.Codes()
	}
	return nil
}

// closedPort is a loopback address nothing listens on (a registry that is
// down).
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestErrorMapping: what failed decides the field an error names and its
// Gardener code: the OSC's content is a configuration problem naming its
// field; a registry that is down, failing or refusing the credentials
// names no providerConfig field (it is not a configuration fault) and
// carries the infrastructure code; a missing base names the base.
func TestErrorMapping(t *testing.T) {
	e := newFakeEnv(t)
	down := closedPort(t)
	refusing := regtest.NewFaultProxy(t, e.host)
	refusing.SetFault(func(*http.Request) regtest.Fault { return regtest.Fault{Status: http.StatusUnauthorized} })
	failing := regtest.NewFaultProxy(t, e.host)
	failing.SetFault(func(*http.Request) regtest.Fault { return regtest.Fault{Status: http.StatusServiceUnavailable} })
	e.act = e.actuator(pipelineInsecure(e.host, down, refusing.Host, failing.Host))
	for _, tc := range []struct {
		name   string
		change func(cfg map[string]any, o *extensionsv1alpha1.OperatingSystemConfig)
		field  string // the message starts with it
		not    string // the message does not contain it
		code   gardencorev1beta1.ErrorCode
	}{
		{"placeholder", func(c map[string]any, _ *extensionsv1alpha1.OperatingSystemConfig) {
			c["target"] = e.host + "/{cluster}"
		},
			"spec.providerConfig.target", "", gardencorev1beta1.ErrorConfigurationProblem},
		{"unknown field", func(c map[string]any, _ *extensionsv1alpha1.OperatingSystemConfig) { c["baseImage"] = "x" },
			"spec.providerConfig", "", gardencorev1beta1.ErrorConfigurationProblem},
		{"no pool", func(_ map[string]any, o *extensionsv1alpha1.OperatingSystemConfig) {
			delete(o.Labels, v1beta1constants.LabelWorkerPool)
		}, "metadata.labels[worker.gardener.cloud/pool]", "", gardencorev1beta1.ErrorConfigurationProblem},
		{"no key Secret", func(c map[string]any, _ *extensionsv1alpha1.OperatingSystemConfig) {
			c["signing"] = map[string]any{"keySecretRef": map[string]any{"name": "missing"}}
		}, "spec.providerConfig.signing.keySecretRef", "", gardencorev1beta1.ErrorConfigurationProblem},
		{"literal Secret name", func(c map[string]any, _ *extensionsv1alpha1.OperatingSystemConfig) {
			c["signing"] = map[string]any{"keySecretRef": map[string]any{"name": exttest.KeySecretCopy}}
		}, `spec.providerConfig.signing.keySecretRef.name: Not found: "` + exttest.KeySecretCopy + ` (not a resource of the shoot`, "", gardencorev1beta1.ErrorConfigurationProblem},
		{"missing base", func(c map[string]any, _ *extensionsv1alpha1.OperatingSystemConfig) {
			c["base"] = e.host + "/fcos/missing:stable"
		},
			"spec.providerConfig.base", "", ""},
		{"registry down", func(c map[string]any, _ *extensionsv1alpha1.OperatingSystemConfig) {
			c["base"], c["target"] = down+"/fcos/base:stable", down+"/os/{pool}"
		}, "build step base: registry unavailable", "spec.providerConfig", gardencorev1beta1.ErrorRetryableInfraDependencies},
		{"registry failing", func(c map[string]any, _ *extensionsv1alpha1.OperatingSystemConfig) {
			c["base"], c["target"] = failing.Host+"/fcos/base:stable", failing.Host+"/os/{pool}"
		}, "build step base: registry unavailable", "spec.providerConfig", gardencorev1beta1.ErrorRetryableInfraDependencies},
		{"credentials refused", func(c map[string]any, _ *extensionsv1alpha1.OperatingSystemConfig) {
			c["base"], c["target"] = refusing.Host+"/fcos/base:stable", refusing.Host+"/os/{pool}"
		}, "build step base: the registry refused the credentials (the extension's registry credentials)", "spec.providerConfig", gardencorev1beta1.ErrorInfraUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := e.config()
			o := exttestOSC(e, strings.ReplaceAll(tc.name, " ", "-"), cfg)
			tc.change(cfg, o)
			o = e.create(t, o, cfg)
			_, _, _, _, err := e.act.Reconcile(e.ctx, e.log, o)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tc.field) || (tc.not != "" && strings.Contains(msg, tc.not)) {
				t.Errorf("error %q: want it to start with %q and not to name %q", msg, tc.field, tc.not)
			}
			if got := codes(err); (tc.code == "" && len(got) > 0) || (tc.code != "" && !slices.Contains(got, tc.code)) {
				t.Errorf("codes %v; want %q", got, tc.code)
			}
		})
	}
}
