package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
)

// nodeAgentLabels are the labels of the Secret gardener-node-agent reads
// for a worker pool (its name carries a hash of the pool's settings).
func nodeAgentLabels(pool string) map[string]string {
	return map[string]string{"gardener.cloud/role": "operating-system-config", "worker.gardener.cloud/pool": pool}
}

// TestGardenerSelector selects the node-agent's OSC Secret by its labels:
// the pool's Secret (not another pool's) gives a Ready signed image; a
// newer matching Secret (the pool rolling to new settings) is built while
// the old one still exists; a change of the old one builds nothing; a
// selector that matches nothing is Degraded naming the field.
func TestGardenerSelector(t *testing.T) {
	e := start(t)
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gardener-node-agent-worker-1111", Namespace: e.ns,
		Labels: nodeAgentLabels("worker")}, Data: oscSecret("one")})
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gardener-node-agent-other-2222", Namespace: e.ns,
		Labels: nodeAgentLabels("other")}, Data: oscSecret("other")})
	e.create(t, e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{
		Selector: &metav1.LabelSelector{MatchLabels: nodeAgentLabels("worker")}}}))
	pi := e.wait(t, "worker", "Ready", ready)
	first := pi.Status.Image
	e.verify(t, first)
	if pi.Status.Builds[0].Result != "Succeeded" {
		t.Fatalf("builds %+v", pi.Status.Builds)
	}

	// The pool rolls: a new Secret (created at least a second later, the
	// resolution of creation times) with the new OSC; the old one stays.
	time.Sleep(1100 * time.Millisecond)
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gardener-node-agent-worker-3333", Namespace: e.ns,
		Labels: nodeAgentLabels("worker")}, Data: oscSecret("two")})
	pi = e.wait(t, "worker", "the newer Secret built", func(pi *v1alpha1.PoolImage) bool { return ready(pi) && pi.Status.Image != first })
	second := pi.Status.Image
	e.verify(t, second)

	// The old nodes' Secret changes: not what is built, nothing happens.
	e.proxy.Reset()
	e.updateSecret(t, "gardener-node-agent-worker-1111", func(s *corev1.Secret) { s.Data = oscSecret("old nodes") })
	time.Sleep(2 * time.Second)
	if pi := e.get(t, "worker"); pi.Status.Image != second || len(pi.Status.Builds) != 2 || e.proxy.Uploads() != 0 {
		t.Errorf("a change of the older Secret built: builds %+v, %d uploads", pi.Status.Builds, e.proxy.Uploads())
	}

	// Both go: Degraded names the field, the last good image stays.
	for _, n := range []string{"gardener-node-agent-worker-1111", "gardener-node-agent-worker-3333"} {
		if err := e.c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: e.ns}}); err != nil {
			t.Fatal(err)
		}
	}
	pi = e.wait(t, "worker", "Degraded", degraded)
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	if c.Reason != controller.ReasonInvalid || !strings.Contains(c.Message, "spec.source.gardener.selector") ||
		!strings.Contains(c.Message, "worker.gardener.cloud/pool=worker") {
		t.Errorf("Degraded %s: %q", c.Reason, c.Message)
	}
	if pi.Status.Image != second {
		t.Errorf("status.image %q, want the last good %q", pi.Status.Image, second)
	}
}
