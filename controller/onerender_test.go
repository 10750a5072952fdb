package controller_test

import (
	"context"
	"testing"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
)

// TestOneRenderPerChange: one user change of an OpenShift pool's
// MachineConfigs makes the pool pass through exactly one new rendered
// MachineConfig, and that one already carries the new image. The MCO's
// render controller is played by renderStandIn (its 5 s render delay, its
// work queue, its selection); the MachineConfig and MachineConfigPool
// CRDs are OpenShift's. The controller builds from the MachineConfigs as
// soon as one changes and publishes the osImageURL MachineConfig while
// the MCO still waits: its one render has both. Two kinds of change: a
// MachineConfig edited, a MachineConfig added.
//
// "the old design" plays what the controller did before (build from the
// pool's rendered MachineConfig, publish after it): the same change makes
// the pool pass through two rendered MachineConfigs, the first without
// the image, so the stand-in's count can fail.
func TestOneRenderPerChange(t *testing.T) {
	e := newEnv(t)
	e.runManager(t, nil)
	ctx := context.Background()
	pool := e.ns
	mco := startRenderStandIn(t, e, pool)
	e.openShiftPool(t, pool, mcfgv1.MachineConfigSpec{Config: ignitionFile("/etc/oslayer/pool.conf", "one")})
	pi := e.poolImage("pool", v1alpha1.Source{OpenShift: &v1alpha1.OpenShiftSource{MachineConfigPool: pool}})
	pi.Spec.Publish = &v1alpha1.Publish{MachineConfig: &v1alpha1.PublishMachineConfig{}}
	e.create(t, pi)
	image := ""
	mco.settle(t, "the pool rendered with the first image", func() bool {
		image = e.get(t, "pool").Status.Image
		return image != "" && mco.current(t).Spec.OSImageURL == image
	})
	_, before := mco.rendersSince(0)
	t.Logf("adopted: %d rendered configs, the pool at %s", before, mco.current(t).Name)

	changes := []struct {
		name   string
		change func()
	}{
		{"a MachineConfig edited", func() {
			var mc mcfgv1.MachineConfig
			if err := e.c.Get(ctx, client.ObjectKey{Name: "00-" + pool}, &mc); err != nil {
				t.Fatal(err)
			}
			mc.Spec.Config = ignitionFile("/etc/oslayer/pool.conf", "two")
			if err := e.c.Update(ctx, &mc); err != nil {
				t.Fatal(err)
			}
		}},
		{"a MachineConfig added", func() {
			e.create(t, &mcfgv1.MachineConfig{
				ObjectMeta: metav1.ObjectMeta{Name: "50-" + pool + "-user", Labels: map[string]string{roleLabel: pool}},
				Spec:       mcfgv1.MachineConfigSpec{Config: ignitionFile("/etc/oslayer/user.conf", "three")},
			})
		}},
	}
	for _, c := range changes {
		old := image
		c.change()
		mco.settle(t, c.name+": the pool rendered with a new image", func() bool {
			image = e.get(t, "pool").Status.Image
			return image != old && mco.current(t).Spec.OSImageURL == image
		})
		renders, n := mco.rendersSince(before)
		t.Logf("%s: the pool passed through %d rendered config(s) %v, the last with %s (built in %s s of the %s window)",
			c.name, len(renders), renders, image, e.get(t, "pool").Status.Builds[0].Seconds, renderDelay)
		if len(renders) != 1 {
			t.Errorf("%s: the pool passed through %d rendered configs %v, want 1", c.name, len(renders), renders)
		}
		before = n
	}
	if pi := e.get(t, "pool"); len(pi.Status.Builds) != 3 {
		t.Errorf("builds %+v, want 3", pi.Status.Builds)
	}

	t.Run("the old design", func(t *testing.T) {
		oldPool := pool + "-old"
		mco := startRenderStandIn(t, e, oldPool)
		e.openShiftPool(t, oldPool, mcfgv1.MachineConfigSpec{Config: ignitionFile("/etc/oslayer/pool.conf", "one")})
		publish := func(url string) {
			t.Helper()
			mc := &mcfgv1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: controller.PublishedMachineConfigName(oldPool),
				Labels: map[string]string{roleLabel: oldPool}}}
			if err := e.c.Get(ctx, client.ObjectKeyFromObject(mc), mc); err != nil {
				mc.Spec.OSImageURL = url
				e.create(t, mc)
				return
			}
			mc.Spec.OSImageURL = url
			if err := e.c.Update(ctx, mc); err != nil {
				t.Fatal(err)
			}
		}
		const one, two = "example.com/os@sha256:1111111111111111111111111111111111111111111111111111111111111111",
			"example.com/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
		publish(one)
		mco.settle(t, "the old pool rendered with its first image", func() bool { return mco.current(t).Spec.OSImageURL == one })
		_, before := mco.rendersSince(0)
		var mc mcfgv1.MachineConfig
		if err := e.c.Get(ctx, client.ObjectKey{Name: "00-" + oldPool}, &mc); err != nil {
			t.Fatal(err)
		}
		mc.Spec.Config = ignitionFile("/etc/oslayer/pool.conf", "two")
		if err := e.c.Update(ctx, &mc); err != nil {
			t.Fatal(err)
		}
		// The old controller built when the pool's rendered MachineConfig
		// changed, and published then.
		mco.settle(t, "the user's render", func() bool { r, _ := mco.rendersSince(before); return len(r) > 0 })
		publish(two)
		mco.settle(t, "the render of the published image", func() bool { return mco.current(t).Spec.OSImageURL == two })
		renders, _ := mco.rendersSince(before)
		t.Logf("the old design: the pool passed through %d rendered configs %v", len(renders), renders)
		if len(renders) != 2 {
			t.Errorf("the old design: %d rendered configs %v, want 2", len(renders), renders)
		}
	})
}
