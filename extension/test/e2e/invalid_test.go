package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/extension/test/exttest"
	buildsettings "github.com/oslayer/oslayer/pipeline/settings"
)

// TestInvalid: an invalid providerConfig or OSC ends in status.lastError
// naming the OSC field, with Gardener's configuration problem code, and
// pushes nothing (the registry holds no repository of those pools); they
// are retried with a backoff, not every few milliseconds.
func TestInvalid(t *testing.T) {
	e := exttest.New(t, exttest.Options{})
	e.StartManager(t, 2)
	ns := e.Shoot(t, "worker", "43.1")
	const reconcile = extensionsv1alpha1.OperatingSystemConfigPurposeReconcile

	badTarget := e.Config()
	badTarget.Target = e.Host + "/os/{cluster}/{pool}"
	unknownField := json.RawMessage(`{"apiVersion":"oslayer.os.extensions.gardener.cloud/v1alpha1","kind":"OperatingSystemConfiguration","target":"` +
		e.Host + `/os/{namespace}/{pool}","base":"` + e.Base + `","baseImage":"x"}`)
	badPreflight := e.Config()
	badPreflight.Preflight = &buildsettings.Preflight{Skip: []string{"no-such-check"}}
	badUnit := exttest.OSC(ns, "bad-unit", "badunit", reconcile, e.Config(), "x")
	badUnit.Spec.Units[0].FilePaths = []string{"/usr/local/bin/missing"}
	noPool := exttest.OSC(ns, "no-pool", "nopool", reconcile, e.Config(), "x")
	delete(noPool.Labels, "worker.gardener.cloud/pool")

	cases := []struct {
		osc   *extensionsv1alpha1.OperatingSystemConfig
		field string
	}{
		{exttest.OSC(ns, "bad-target", "badtarget", reconcile, badTarget, "x"), "spec.providerConfig.target"},
		{exttest.OSC(ns, "unknown-field", "unknownfield", reconcile, unknownField, "x"), `spec.providerConfig: strict decoding error: unknown field "baseImage"`},
		{exttest.OSC(ns, "bad-preflight", "badpreflight", reconcile, badPreflight, "x"), "spec.providerConfig.preflight.skip[0]"},
		{badUnit, "spec.units/spec.files"},
		{noPool, "metadata.labels[worker.gardener.cloud/pool]"},
	}
	before, start := reconcileErrors(t), time.Now()
	for _, c := range cases {
		e.Create(t, c.osc)
	}
	for _, c := range cases {
		got := wait(t, e, c.osc, "lastError", failed)
		le := got.Status.LastError
		if !strings.Contains(le.Description, c.field) {
			t.Errorf("%s: status.lastError %q does not name %s", c.osc.Name, le.Description, c.field)
		}
		if !slices.Contains(le.Codes, gardencorev1beta1.ErrorConfigurationProblem) {
			t.Errorf("%s: status.lastError codes %v: want %s", c.osc.Name, le.Codes, gardencorev1beta1.ErrorConfigurationProblem)
		}
		t.Logf("%s: %s", c.osc.Name, le.Description)
	}
	checkBackoff(t, len(cases), before, start)
	for _, repo := range e.Catalog(t) {
		if strings.HasPrefix(repo, "os/") {
			t.Errorf("an invalid OSC pushed %s", repo)
		}
	}
}
