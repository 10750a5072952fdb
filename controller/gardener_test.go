package controller_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/test/fixtures"
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

// nodeAgentSecret is the Secret gardener-node-agent reads for pool, shaped
// as Gardener writes it: the fixture made by Gardener's own
// nodeagent.OperatingSystemConfigSecret for pool worker-a
// (secret-osc-worker-a-resolved.yaml) with the pool, the name's hash and
// the OSC replaced. The fixture's shape is checked first: name
// gardener-node-agent-POOL-HASH (16 hex digits), exactly the labels
// gardener.cloud/role: operating-system-config and
// worker.gardener.cloud/pool: POOL, the annotation checksum/data-script
// holding the SHA-256 of data key osc.yaml, nothing else.
func nodeAgentSecret(t *testing.T, ns, pool, hash string, osc []byte) *corev1.Secret {
	t.Helper()
	b, err := os.ReadFile(fixtures.Path(t, "gardener", "generated", "secret-osc-worker-a-resolved.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	if err := yaml.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	const fixturePool = "worker-a"
	sum := sha256.Sum256(s.Data["osc.yaml"])
	if !regexp.MustCompile(`^gardener-node-agent-`+fixturePool+`-[0-9a-f]{16}$`).MatchString(s.Name) || s.Namespace != "kube-system" ||
		len(s.Labels) != 2 || s.Labels["worker.gardener.cloud/pool"] != fixturePool || s.Labels["gardener.cloud/role"] != "operating-system-config" ||
		len(s.Annotations) != 1 || s.Annotations["checksum/data-script"] != hex.EncodeToString(sum[:]) || len(s.Data) != 1 {
		t.Fatalf("the node agent's Secret of the fixture has another shape: %s/%s labels %v annotations %v keys %d",
			s.Namespace, s.Name, s.Labels, s.Annotations, len(s.Data))
	}
	s.Name, s.Namespace = "gardener-node-agent-"+pool+"-"+hash, ns
	s.Labels["worker.gardener.cloud/pool"] = pool
	sum = sha256.Sum256(osc)
	s.Annotations["checksum/data-script"] = hex.EncodeToString(sum[:])
	s.Data = map[string][]byte{"osc.yaml": osc}
	return &s
}

// TestGardenerSample applies the Gardener sample of config/samples (its
// namespace, base and target moved to the test's) and gives it the
// node agent's Secrets as Gardener writes them: the sample's pool's and
// another pool's. It selects its pool's Secret and builds it; when the
// pool's settings change Gardener writes the Secret under a new name (a new
// hash), and the sample follows: it builds the new Secret's OSC.
func TestGardenerSample(t *testing.T) {
	e := start(t)
	var pi *unstructured.Unstructured
	for _, u := range manifests(t, filepath.Join("..", "config", "samples")) {
		if _, ok, _ := unstructured.NestedMap(u.Object, "spec", "source", "gardener"); ok && u.GetKind() == "PoolImage" {
			pi = u
		}
	}
	if pi == nil {
		t.Fatal("config/samples has no PoolImage of the Gardener source")
	}
	if name, _, _ := unstructured.NestedString(pi.Object, "spec", "source", "gardener", "secretName"); name != "" {
		t.Errorf("the sample names the node agent's Secret %q: its name changes with the pool's settings", name)
	}
	pool, _, _ := unstructured.NestedString(pi.Object, "spec", "pool")
	pi.SetNamespace(e.ns)
	for field, v := range map[string]string{"base": e.base, "target": e.host + "/os/" + pi.GetName() + ":latest"} {
		if err := unstructured.SetNestedField(pi.Object, v, "spec", field); err != nil {
			t.Fatal(err)
		}
	}
	push, _, _ := unstructured.NestedString(pi.Object, "spec", "pushSecret", "name")
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: push, Namespace: e.ns}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + e.host + `":{"auth":"dXNlcjpwYXNz"}}}`)}})
	e.create(t, nodeAgentSecret(t, e.ns, pool+"-other", "0123456789abcdef", oscSecret("another pool")["osc.yaml"]))
	e.create(t, nodeAgentSecret(t, e.ns, pool, "67e806e018b7d00f", oscSecret("one")["osc.yaml"]))
	e.apply(t, []*unstructured.Unstructured{pi}, func(*unstructured.Unstructured) bool { return false })

	built := func(pi *v1alpha1.PoolImage) string {
		t.Helper()
		e.verify(t, pi.Status.Image)
		files, _ := imageFiles(t, pi.Status.Image)
		return files["etc/oslayer/pool.conf"]
	}
	first := e.wait(t, pi.GetName(), "Ready", ready)
	if got := built(first); got != "one" {
		t.Fatalf("the sample built /etc/oslayer/pool.conf %q, want its pool's \"one\"", got)
	}

	// The pool's settings change: a new Secret (a second later, the
	// resolution of creation times, as the newest is built) with the new
	// OSC; Gardener deletes the old one later.
	time.Sleep(1100 * time.Millisecond)
	e.create(t, nodeAgentSecret(t, e.ns, pool, "fedcba9876543210", oscSecret("two")["osc.yaml"]))
	second := e.wait(t, pi.GetName(), "the renamed Secret built", func(p *v1alpha1.PoolImage) bool {
		return ready(p) && p.Status.Image != first.Status.Image
	})
	if got := built(second); got != "two" {
		t.Fatalf("after the rename the sample built /etc/oslayer/pool.conf %q, want \"two\"", got)
	}
}
