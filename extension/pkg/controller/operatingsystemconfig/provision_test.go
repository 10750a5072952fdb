package operatingsystemconfig_test

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	reconcilerutils "github.com/gardener/gardener/pkg/controllerutils/reconciler"
)

// provision runs the actuator on the provision OSC and returns its user
// data.
func (e *fakeEnv) provision(t *testing.T, o *extensionsv1alpha1.OperatingSystemConfig) (string, error) {
	t.Helper()
	ud, units, files, ipu, err := e.act.Reconcile(e.ctx, e.log, o)
	if len(units)+len(files) > 0 || ipu != nil {
		t.Errorf("provision OSC: %d units, %d files, %v; want only user data", len(units), len(files), ipu)
	}
	return string(ud), err
}

// settle marks the reconcile OSC as the library does once it reconciled
// its current spec (status.observedGeneration at metadata.generation).
func (e *fakeEnv) settle(t *testing.T, o *extensionsv1alpha1.OperatingSystemConfig) {
	t.Helper()
	if err := e.client.Get(e.ctx, client.ObjectKeyFromObject(o), o); err != nil {
		t.Fatal(err)
	}
	o.Status.ObservedGeneration = o.Generation
	if err := e.client.Status().Update(e.ctx, o); err != nil {
		t.Fatal(err)
	}
}

// TestProvisionFakeClient: a pool without a reconcile OSC boots the plain
// base; while its reconcile OSC has not reconciled its spec the
// provision OSC waits (RequeueAfterError naming the reconcile OSC); once
// it recorded its image the user data pivots onto it by digest and
// trusts the signing key.
func TestProvisionFakeClient(t *testing.T) {
	e := newFakeEnv(t)
	prov := e.osc(t, "prov", extensionsv1alpha1.OperatingSystemConfigPurposeProvision, e.config())
	ud, err := e.provision(t, prov)
	if err != nil || ud == "" || strings.Contains(ud, "oslayer-pivot.service") || strings.Contains(ud, "/etc/containers/policy.json") {
		t.Fatalf("no reconcile OSC: user data %d bytes, %v; want the plain base's, no pivot, no trust", len(ud), err)
	}
	rec := e.osc(t, "rec", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, e.config())
	rec.Generation, rec.Status.ObservedGeneration = 2, 1
	if err := e.client.Status().Update(e.ctx, rec); err != nil {
		t.Fatal(err)
	}
	_, err = e.provision(t, prov)
	var rq *reconcilerutils.RequeueAfterError
	if !errors.As(err, &rq) || rq.RequeueAfter <= 0 || !strings.Contains(err.Error(), "status.providerStatus.image of the pool's reconcile OSC rec") {
		t.Fatalf("reconcile OSC not reconciled: %v; want a RequeueAfterError naming it", err)
	}
	image := e.reconcileOSC(t, rec)
	e.settle(t, rec)
	ud, err = e.provision(t, prov)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ud, "os-update --retry "+image) || !strings.Contains(ud, "/etc/containers/policy.json") || !strings.Contains(ud, "/etc/pki/containers/oslayer-") {
		t.Errorf("user data does not pivot onto %s with its signature enforced:\n%s", image, ud)
	}
}
