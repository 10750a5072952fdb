package e2e

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/extension/test/exttest"
)

// TestMigrateRestore: a migrated OSC loses its finalizer and its image
// stays in the registry (nothing to clean up); restored, it records the
// same image again (builds are reproducible).
func TestMigrateRestore(t *testing.T) {
	e := exttest.New(t, exttest.Options{})
	e.StartManager(t, 1)
	ns := e.Shoot(t, "worker", "43.1")
	osc := exttest.OSC(ns, "osc-worker-original", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, e.Config(), "one")
	e.Create(t, osc)
	image := status(t, wait(t, e, osc, "Succeeded", succeeded)).Image

	// done reports the operation typ finished. After a restore, a request
	// the library queued while it ran (the restore's own status update
	// still carries the annotation) may reconcile once more and record
	// Reconcile: the library skips every reconcile of a migrated OSC, so a
	// Reconcile after the migration means the restore succeeded first.
	done := func(o *extensionsv1alpha1.OperatingSystemConfig, typ gardencorev1beta1.LastOperationType) bool {
		lo := o.Status.LastOperation
		if lo == nil || lo.State != gardencorev1beta1.LastOperationStateSucceeded || o.Annotations["gardener.cloud/operation"] != "" {
			return false
		}
		return lo.Type == typ || typ == gardencorev1beta1.LastOperationTypeRestore && lo.Type == gardencorev1beta1.LastOperationTypeReconcile
	}
	operation := func(op string, typ gardencorev1beta1.LastOperationType) *extensionsv1alpha1.OperatingSystemConfig {
		o, err := e.Get(osc)
		if err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(o.DeepCopy())
		o.Annotations["gardener.cloud/operation"] = op
		if err := e.Client.Patch(e.Ctx, o, patch); err != nil {
			t.Fatal(err)
		}
		return wait(t, e, osc, string(typ)+" Succeeded", func(o *extensionsv1alpha1.OperatingSystemConfig) bool { return done(o, typ) })
	}
	if o := operation("migrate", gardencorev1beta1.LastOperationTypeMigrate); len(o.Finalizers) > 0 {
		t.Errorf("migrated OSC keeps finalizers %v", o.Finalizers)
	}
	d, err := name.NewDigest(image)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(d); err != nil {
		t.Errorf("the image is gone after the migration: %v", err)
	}
	o := operation("restore", gardencorev1beta1.LastOperationTypeRestore)
	if len(o.Finalizers) == 0 {
		t.Error("the restored OSC has no finalizer")
	}
	if got := status(t, o).Image; got != image {
		t.Errorf("restored image %s, want the same %s", got, image)
	}
}
