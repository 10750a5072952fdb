package e2e

import (
	"net/http"
	"strings"
	"testing"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/extension/test/exttest"
	"github.com/oslayer/oslayer/test/regtest"
)

// TestReconcileUnchangedWritesNothing: a reconcile of an OSC that did not
// change (gardenlet's operation annotation only) makes no write to the
// registry, counted at a proxy in front of it: no blob upload, no
// manifest or tag PUT, no signature or attestation re-pushed (the
// provenance names the OSC by content and name, not by the temporary
// file the reconcile writes it to).
func TestReconcileUnchangedWritesNothing(t *testing.T) {
	e := exttest.New(t, exttest.Options{})
	p := regtest.NewProxy(t, e.Host)
	e.Host, e.Base = p.Host, strings.Replace(e.Base, e.Host, p.Host, 1)
	e.StartManager(t, 1)
	ns := e.Shoot(t, "worker", "43.1")
	osc := exttest.OSC(ns, "osc-worker-original", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, e.Config(), "one")
	e.Create(t, osc)
	first := status(t, wait(t, e, osc, "Succeeded", succeeded)).Image
	if p.Uploads() == 0 {
		t.Fatalf("the first reconcile wrote nothing through the proxy:\n%s", p.Dump())
	}

	for i := range 2 {
		p.Reset()
		update(t, e, osc, func(*extensionsv1alpha1.OperatingSystemConfig) {})
		got := wait(t, e, osc, "reconciled again", func(o *extensionsv1alpha1.OperatingSystemConfig) bool {
			lo := o.Status.LastOperation
			return lo != nil && lo.State == gardencorev1beta1.LastOperationStateSucceeded && o.Annotations["gardener.cloud/operation"] == ""
		})
		if img := status(t, got).Image; img != first {
			t.Fatalf("reconcile %d: image %s, want %s", i+2, img, first)
		}
		var writes []string
		for _, r := range p.Requests() {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				writes = append(writes, r.Method+" "+r.Path)
			}
		}
		if len(writes) > 0 {
			t.Fatalf("unchanged reconcile %d wrote to the registry:\n%s", i+2, strings.Join(writes, "\n"))
		}
	}
}
