package controller_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
)

// configMapSays waits until the published ConfigMap name says image.
func (e *env) configMapSays(t *testing.T, name, image string) {
	t.Helper()
	var cm corev1.ConfigMap
	e.until(t, &corev1.ConfigMapList{}, []client.ListOption{client.InNamespace(e.ns)}, func() bool {
		err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &cm)
		return err == nil && cm.Data[controller.ConfigMapImage] == image
	}, func() string {
		return "ConfigMap " + name + " does not say " + image + ": " + cm.Data[controller.ConfigMapImage]
	})
}

// setPin sets spec.pin ("" removes it).
func (e *env) setPin(t *testing.T, name, pin string) {
	t.Helper()
	pi := e.get(t, name)
	pi.Spec.Pin = pin
	if err := e.c.Update(context.Background(), pi); err != nil {
		t.Fatal(err)
	}
}

func condition(pi *v1alpha1.PoolImage, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(pi.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// TestPin rolls a Gardener pool (published as a ConfigMap) back: spec.pin
// names the first good build of the history, which is published (Pinned,
// status.published); a newer input is still built and recorded but held;
// a digest that is no good build of the history is refused (Degraded
// PinInvalid naming spec.pin) and publishes nothing new; removing spec.pin
// publishes the newest build. The status records each change's predicted
// action per platform, download and changed paths with their sources.
func TestPin(t *testing.T) {
	e := newEnv(t)
	e.runManager(t, nil)
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc", Namespace: e.ns}, Data: oscSecret("one")})
	pi := e.poolImage("pin", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc"}})
	pi.Spec.Publish = &v1alpha1.Publish{ConfigMap: "pin-image"}
	e.create(t, pi)
	pi = e.wait(t, "pin", "the first image", ready)
	first := pi.Status.Image
	e.configMapSays(t, "pin-image", first)

	e.updateSecret(t, "osc", func(s *corev1.Secret) { s.Data = oscSecret("two") })
	pi = e.newBuild(t, "pin", "the second image", []string{first}, decided(v1alpha1.DecisionBuilt))
	second := pi.Status.Image
	e.configMapSays(t, "pin-image", second)
	ch := pi.Status.Change
	if p := platform(t, ch, "gardener"); ch.From != first || !p.Applies || p.Action != "restart" && p.Action != "none" ||
		ch.DownloadBytes <= 0 || changedPath(ch, "/etc/oslayer/pool.conf") == nil || !strings.Contains(changedPath(ch, "/etc/oslayer/pool.conf").Source, "OperatingSystemConfig") {
		t.Errorf("status.change %+v", ch)
	}
	t.Logf("change: action %s, %d bytes, paths %+v, platforms %+v", ch.Action, ch.DownloadBytes, ch.Paths, ch.Platforms)

	// Roll back: the first image is published, Pinned says so.
	e.setPin(t, "pin", digestOf(first))
	pi = e.wait(t, "pin", "Pinned", func(pi *v1alpha1.PoolImage) bool {
		return meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionPinned)
	})
	if p := pi.Status.Published; p.Image != first || p.Decision != v1alpha1.DecisionPinned || degraded(pi) {
		t.Errorf("status.published %+v, Degraded %+v", p, condition(pi, v1alpha1.ConditionDegraded))
	}
	e.configMapSays(t, "pin-image", first)
	if ev := e.events(t, "pin")["Pinned"]; len(ev) == 0 {
		t.Error("no Pinned Event")
	}

	// A newer input is built and recorded, not published.
	e.updateSecret(t, "osc", func(s *corev1.Secret) { s.Data = oscSecret("three") })
	pi = e.wait(t, "pin", "the third image", func(pi *v1alpha1.PoolImage) bool {
		return ready(pi) && pi.Status.Image != second && pi.Status.Image != first && strings.Contains(pi.Status.Published.Message, pi.Status.Image)
	})
	third := pi.Status.Image
	if p := pi.Status.Published; p.Image != first || !strings.Contains(p.Message, "held back") || len(pi.Status.Builds) != 3 {
		t.Errorf("status.published %+v, builds %d", p, len(pi.Status.Builds))
	}
	e.verify(t, third)
	e.configMapSays(t, "pin-image", first)

	// An unknown digest is refused; the pinned image stays published.
	unknown := "sha256:" + strings.Repeat("0", 64)
	e.setPin(t, "pin", unknown)
	pi = e.wait(t, "pin", "Degraded PinInvalid", func(pi *v1alpha1.PoolImage) bool {
		return condition(pi, v1alpha1.ConditionDegraded).Reason == v1alpha1.ReasonPinInvalid
	})
	if c := condition(pi, v1alpha1.ConditionDegraded); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "spec.pin "+unknown+" is no build of status.builds") ||
		condition(pi, v1alpha1.ConditionPinned).Status != metav1.ConditionFalse || pi.Status.Published.Image != first {
		t.Errorf("Degraded %+v, Pinned %+v, published %+v", c, condition(pi, v1alpha1.ConditionPinned), pi.Status.Published)
	}
	e.configMapSays(t, "pin-image", first)

	// Unpinned: the newest build is published, Degraded and Pinned clear.
	e.setPin(t, "pin", "")
	pi = e.wait(t, "pin", "the newest build published", func(pi *v1alpha1.PoolImage) bool {
		return pi.Status.Published.Image == third && !degraded(pi)
	})
	if c := condition(pi, v1alpha1.ConditionPinned); c.Status != metav1.ConditionFalse || c.Reason != controller.ReasonNotPinned {
		t.Errorf("Pinned %+v", c)
	}
	e.configMapSays(t, "pin-image", third)
}
