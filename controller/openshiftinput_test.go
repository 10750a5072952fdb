package controller_test

import (
	"context"
	"strings"
	"testing"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
)

// TestOpenShiftPoolSelectsNothing: a pool whose machineConfigSelector
// selects no MachineConfig is bad input: Degraded names the field, the
// pool and the selector, nothing is built or published. The first
// MachineConfig it selects builds (the MachineConfig watch), and a
// MachineConfig of another role does not.
func TestOpenShiftPoolSelectsNothing(t *testing.T) {
	e := start(t)
	pool := e.ns
	e.create(t, &mcfgv1.MachineConfigPool{
		ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: mcfgv1.MachineConfigPoolSpec{
			MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{roleLabel: pool}},
		},
	})
	pi := e.poolImage("pool", v1alpha1.Source{OpenShift: &v1alpha1.OpenShiftSource{MachineConfigPool: pool}})
	pi.Spec.Publish = &v1alpha1.Publish{MachineConfig: &v1alpha1.PublishMachineConfig{}}
	e.create(t, pi)
	pi = e.wait(t, "pool", "Degraded", degraded)
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	want := "step source: spec.source.openshift.machineConfigPool: MachineConfigPool " + pool +
		" selects no MachineConfig (spec.machineConfigSelector \"" + roleLabel + "=" + pool + "\")"
	if c.Reason != controller.ReasonInvalid || c.Message != want || pi.Status.Image != "" {
		t.Errorf("Degraded %s: %q, want %q; image %q", c.Reason, c.Message, want, pi.Status.Image)
	}
	var mc mcfgv1.MachineConfig
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: controller.PublishedMachineConfigName(pool)}, &mc); err == nil {
		t.Errorf("published %s for a pool without MachineConfigs", mc.Name)
	}
	e.create(t, &mcfgv1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "00-" + pool + "-other", Labels: map[string]string{roleLabel: pool + "-other"}},
		Spec:       mcfgv1.MachineConfigSpec{Config: ignitionFile("/etc/oslayer/other.conf", "x")},
	})
	e.create(t, &mcfgv1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "00-" + pool, Labels: map[string]string{roleLabel: pool}},
		Spec:       mcfgv1.MachineConfigSpec{Config: ignitionFile("/etc/oslayer/pool.conf", "one")},
	})
	pi = e.wait(t, "pool", "Ready", func(pi *v1alpha1.PoolImage) bool { return ready(pi) && !degraded(pi) })
	files, _ := imageFiles(t, pi.Status.Image)
	if files["etc/oslayer/pool.conf"] != "one" || files["etc/oslayer/other.conf"] != "" {
		t.Errorf("the image has pool.conf %q, other.conf %q", files["etc/oslayer/pool.conf"], files["etc/oslayer/other.conf"])
	}
	if !strings.HasPrefix(pi.Status.Image, e.host+"/os/pool@sha256:") {
		t.Errorf("image %s", pi.Status.Image)
	}
}
