package e2e

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/extension/pkg/nodeside"

	"github.com/oslayer/oslayer/extension/test/exttest"
)

// TestProvisionWaits: gardenlet creates a pool's provision and reconcile
// OSCs together. While the reconcile OSC has not built its image (here
// held by gardenlet's wait-for-state annotation), the provision OSC
// returns no user data and says what it waits for; once the reconcile
// OSC records its image, the provision OSC's user data pivots onto it,
// with nobody touching the provision OSC.
func TestProvisionWaits(t *testing.T) {
	e := exttest.New(t, exttest.Options{})
	e.StartManager(t, 2)
	ns := e.Shoot(t, "worker", "43.1")
	rec := exttest.OSC(ns, "osc-worker-original", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, e.Config(), "one")
	rec.Annotations[v1beta1constants.GardenerOperation] = v1beta1constants.GardenerOperationWaitForState
	e.Create(t, rec)
	prov := exttest.OSC(ns, "osc-worker-downloader", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeProvision, e.Config(), "one")
	e.Create(t, prov)

	got := wait(t, e, prov, "waiting for the pool image", failed)
	if le := got.Status.LastError.Description; !strings.Contains(le, "osc-worker-original") || !strings.Contains(le, "status.providerStatus.image") {
		t.Errorf("status.lastError %q: want the reconcile OSC osc-worker-original and status.providerStatus.image", le)
	}
	if codes := got.Status.LastError.Codes; len(codes) > 0 {
		t.Errorf("status.lastError codes %v: want none (gardenlet keeps waiting on an error without codes)", codes)
	}
	if lo := got.Status.LastOperation; lo == nil || lo.State == gardencorev1beta1.LastOperationStateSucceeded || got.Status.CloudConfig != nil {
		t.Fatalf("provision OSC %s with status.cloudConfig %v: want no user data while the pool image is being built", state(got), got.Status.CloudConfig)
	}

	o, err := e.Get(rec)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(o.DeepCopy())
	o.Annotations[v1beta1constants.GardenerOperation] = v1beta1constants.GardenerOperationReconcile
	if err := e.Client.Patch(e.Ctx, o, patch); err != nil {
		t.Fatal(err)
	}
	image := status(t, wait(t, e, rec, "Succeeded", succeeded)).Image
	want, err := expectedUserData(t, e, prov, image)
	if err != nil {
		t.Fatal(err)
	}
	waitUserData(t, e, prov, "the pivot onto "+image, want)
	if got := wait(t, e, prov, "Succeeded", succeeded); got.Status.LastError != nil {
		t.Errorf("status.lastError %q after the pool image came", got.Status.LastError.Description)
	}
}

// TestProvisionFollows: a provision OSC reconciled before its pool had a
// reconcile OSC has the plain base's user data; when the pool's reconcile
// OSC then records its image, and again when a changed reconcile OSC
// records a new one, the provision OSC's user data follows (the pivot
// onto the current pool image) without the provision OSC being touched.
func TestProvisionFollows(t *testing.T) {
	e := exttest.New(t, exttest.Options{})
	e.StartManager(t, 2)
	ns := e.Shoot(t, "worker", "43.1")
	prov := exttest.OSC(ns, "osc-worker-downloader", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeProvision, e.Config(), "one")
	e.Create(t, prov)
	plain, err := nodeside.UserData(nodeside.Provision{OSC: prov, Secrets: map[string]map[string][]byte{}})
	if err != nil {
		t.Fatal(err)
	}
	waitUserData(t, e, prov, "the plain base (no reconcile OSC)", plain)

	rec := exttest.OSC(ns, "osc-worker-original", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, e.Config(), "one")
	e.Create(t, rec)
	image := status(t, wait(t, e, rec, "Succeeded", succeeded)).Image
	want, err := expectedUserData(t, e, prov, image)
	if err != nil {
		t.Fatal(err)
	}
	waitUserData(t, e, prov, "the pivot onto "+image, want)

	update(t, e, rec, func(o *extensionsv1alpha1.OperatingSystemConfig) {
		o.Spec.Files[1].Content.Inline.Data = "two\n"
	})
	image2 := status(t, wait(t, e, rec, "Succeeded with a new image", func(o *extensionsv1alpha1.OperatingSystemConfig) bool {
		return succeeded(o) && status(t, o).Image != image
	})).Image
	if want, err = expectedUserData(t, e, prov, image2); err != nil {
		t.Fatal(err)
	}
	waitUserData(t, e, prov, "the pivot onto the changed "+image2, want)
}

// TestProvisionFailedPool: when the pool's reconcile OSC fails (its base
// is missing), the provision OSC stops waiting and gives the plain base's
// user data, so that machines can still join.
func TestProvisionFailedPool(t *testing.T) {
	e := exttest.New(t, exttest.Options{})
	e.StartManager(t, 2)
	ns := e.Shoot(t, "worker", "43.1")
	cfg := e.Config()
	cfg.Base = e.Host + "/fcos/missing:{version}"
	prov := exttest.OSC(ns, "osc-worker-downloader", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeProvision, cfg, "one")
	e.Create(t, prov)
	rec := exttest.OSC(ns, "osc-worker-original", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, cfg, "one")
	e.Create(t, rec)

	le := wait(t, e, rec, "lastError", failed).Status.LastError
	if !strings.Contains(le.Description, "spec.providerConfig.base") {
		t.Fatalf("reconcile OSC status.lastError %q: want spec.providerConfig.base", le.Description)
	}
	plain, err := nodeside.UserData(nodeside.Provision{OSC: prov, Secrets: map[string]map[string][]byte{}})
	if err != nil {
		t.Fatal(err)
	}
	waitUserData(t, e, prov, "the plain base (the pool's build failed)", plain)
	if got := wait(t, e, prov, "Succeeded", succeeded); got.Status.LastError != nil {
		t.Errorf("provision OSC status.lastError %q: want none with the plain base", got.Status.LastError.Description)
	}
}

// waitUserData waits (two minutes at most) until the provision OSC's
// user data Secret holds want.
func waitUserData(t *testing.T, e *exttest.Env, osc *extensionsv1alpha1.OperatingSystemConfig, what string, want []byte) {
	t.Helper()
	var last []byte
	var o *extensionsv1alpha1.OperatingSystemConfig
	exttest.Until(t, 2*time.Minute, func() bool {
		var err error
		if o, err = e.Get(osc); err != nil {
			t.Fatal(err)
		}
		cc := o.Status.CloudConfig
		if cc == nil {
			return false
		}
		var s corev1.Secret
		if err := e.Client.Get(e.Ctx, client.ObjectKey{Namespace: cc.SecretRef.Namespace, Name: cc.SecretRef.Name}, &s); err != nil {
			return false
		}
		last = s.Data[extensionsv1alpha1.OperatingSystemConfigSecretDataKey]
		return bytes.Equal(last, want)
	}, func() string {
		return osc.Name + " user data with " + what + ": status " + state(o) + "; pivot " +
			map[bool]string{true: "present", false: "absent"}[bytes.Contains(last, []byte(nodeside.PivotUnit))]
	})
}
