package operatingsystemconfig_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
	"github.com/oslayer/oslayer/extension/pkg/nodeside"
)

// reconcileOSC runs the actuator on the reconcile OSC and returns the
// pool image it records in status.providerStatus (read back from the
// client), checking that the pool-image file and the update command name
// it and that the registry holds it.
func (e *fakeEnv) reconcileOSC(t *testing.T, o *extensionsv1alpha1.OperatingSystemConfig) string {
	t.Helper()
	ud, units, files, ipu, err := e.act.Reconcile(e.ctx, e.log, o)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if ud != nil || len(units) == 0 {
		t.Errorf("reconcile OSC: user data %d bytes, %d units; want none and the extension's units", len(ud), len(units))
	}
	var stored extensionsv1alpha1.OperatingSystemConfig
	if err := e.client.Get(e.ctx, client.ObjectKeyFromObject(o), &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Status.ProviderStatus == nil {
		t.Fatal("status.providerStatus not written")
	}
	st, err := configv1alpha1.DecodeStatus(stored.Status.ProviderStatus.Raw)
	if err != nil {
		t.Fatal(err)
	}
	if st.Version != fakeVersion || st.Base != e.base || !strings.HasPrefix(st.Image, e.host+"/os/"+e.ns+"/"+fakePool+"@sha256:") {
		t.Fatalf("status.providerStatus %+v: want the pool image by digest of version %s on %s", st, fakeVersion, e.base)
	}
	var poolFile string
	for _, f := range files {
		if f.Path == nodeside.PoolImageFile && f.Content.Inline != nil {
			poolFile = f.Content.Inline.Data
		}
	}
	if !strings.Contains(poolFile, st.Image) {
		t.Errorf("%s is %q; want %s", nodeside.PoolImageFile, poolFile, st.Image)
	}
	if ipu == nil || ipu.OSUpdate == nil || !strings.Contains(ipu.OSUpdate.Command+strings.Join(ipu.OSUpdate.Args, " "), st.Image) {
		t.Errorf("status.inPlaceUpdates.osUpdate %+v does not name %s", ipu, st.Image)
	}
	d, err := name.NewDigest(st.Image, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(d, remote.WithContext(context.Background())); err != nil {
		t.Errorf("the pool image is not in the registry: %v", err)
	}
	return st.Image
}

// TestReconcileFakeClient: a reconcile OSC is built onto its base, its
// image recorded, named by the pool-image file and the update command; an
// unchanged reconcile records the same image, a changed OSC another.
func TestReconcileFakeClient(t *testing.T) {
	e := newFakeEnv(t)
	o := e.osc(t, "rec", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, e.config())
	first := e.reconcileOSC(t, o)
	if again := e.reconcileOSC(t, o); again != first {
		t.Errorf("unchanged OSC: %s, then %s", first, again)
	}
	o.Spec.Files[1].Content.Inline.Data = "changed\n"
	if err := e.client.Update(e.ctx, o); err != nil {
		t.Fatal(err)
	}
	if changed := e.reconcileOSC(t, o); changed == first {
		t.Errorf("changed OSC: still %s", first)
	}
}
