package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/test/regtest"
)

// retained is a PoolImage of pool worker pushing to os/worker:latest with
// spec.retention on (default keep, no grace).
func (e *env) retained(name, secret string) *v1alpha1.PoolImage {
	pi := e.poolImage(name, v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: secret}})
	pi.Spec.Pool, pi.Spec.Target = "worker", e.host+"/os/worker:latest"
	pi.Spec.Retention = &v1alpha1.Retention{Enabled: true, Grace: &metav1.Duration{}}
	return pi
}

// buildWith changes the OSC Secret and waits for the build and the
// retention run after it; it returns the new status.image.
func (e *env) buildWith(t *testing.T, name, content string) *v1alpha1.PoolImage {
	t.Helper()
	old := e.get(t, name).Status.Image
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret(content) })
	return e.waitRetention(t, name, old)
}

// waitRetention waits for a good build other than old and the retention
// run after it.
func (e *env) waitRetention(t *testing.T, name, old string) *v1alpha1.PoolImage {
	t.Helper()
	return e.wait(t, name, "a new image and the retention run after it", func(pi *v1alpha1.PoolImage) bool {
		r := pi.Status.Retention
		return ready(pi) && pi.Status.Image != old && r != nil && r.Image == pi.Status.Image
	})
}

// manifest is the registry's HTTP status of GET os/worker/manifests/ref.
func (e *env) manifest(t *testing.T, ref string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, "http://"+e.reg.Host+"/v2/os/worker/manifests/"+ref, nil)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// sigTag is an image's cosign signature tag.
func sigTag(image string) string {
	return strings.Replace(image[strings.LastIndex(image, "@")+1:], ":", "-", 1) + ".sig"
}

// TestRetention: with spec.retention on and the default keep (5), after
// keep+3 builds the images of the five newest builds stay, the first
// stays because a BootcNode (bootc-operator's real CRD) has it as its
// rollback deployment, and the second and third are deleted with their
// signature tags; status.retention counts, the Retention condition and a
// Pruned Event say so.
func TestRetention(t *testing.T) {
	e := start(t)
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("build 1")})
	e.create(t, e.retained("worker", "osc-worker"))
	images := []string{e.waitRetention(t, "worker", "").Status.Image}
	e.bootcNode(t, images[0])
	for i := 2; i <= v1alpha1.DefaultRetentionKeep+3; i++ {
		images = append(images, e.buildWith(t, "worker", fmt.Sprintf("build %d", i)).Status.Image)
	}
	pi := e.get(t, "worker")
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionRetention)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != controller.ReasonPruned {
		t.Errorf("Retention condition %+v", c)
	}
	if r := pi.Status.Retention; r.Deleted != 1 || r.DryRun {
		t.Errorf("the last run: %+v, want 1 deleted (the third build's image)", r)
	}
	for i, img := range images {
		d := img[strings.LastIndex(img, "@")+1:]
		want := http.StatusOK
		if i == 1 || i == 2 {
			want = http.StatusNotFound
		}
		if got, sig := e.manifest(t, d), e.manifest(t, sigTag(img)); got != want || sig != want {
			t.Errorf("build %d's image %s: HTTP %d, its .sig tag %d; want %d", i+1, d, got, sig, want)
		}
	}
	if len(e.events(t, "worker")[controller.ReasonPruned]) == 0 {
		t.Error("no Pruned Event")
	}
}

// bootcNode is a BootcNode that booted another image since: image is
// only its rollback deployment.
func (e *env) bootcNode(t *testing.T, image string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	doc := fmt.Sprintf(`apiVersion: node.bootc.dev/v1alpha1
kind: BootcNode
metadata: {name: %s}
spec: {desiredImage: "quay.io/example/other@sha256:%s", desiredImageState: Booted}
`, e.ns, strings.Repeat("0", 64))
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	e.create(t, u)
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), u) })
	u.Object["status"] = map[string]any{"rollback": map[string]any{"image": image, "imageDigest": image[strings.LastIndex(image, "@")+1:]}}
	if err := e.c.Status().Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

// TestRetentionRefusedDelete: on a registry that refuses DELETE
// (distribution's default) the build is good, the Retention condition is
// false (DeleteRefused) and nothing is deleted: the image of an earlier,
// deleted PoolImage of the same pool (keep 1: it would go) stays.
func TestRetentionRefusedDelete(t *testing.T) {
	e := newEnv(t)
	e.reg, e.proxy = baseRegistry(e.ctx, t, regtest.Config{Filesystem: true, NoDelete: true})
	e.host, e.base = e.proxy.Host, e.proxy.Host+"/fcos/base:stable"
	e.runManager(t, nil)
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("first")})
	first := e.retained("first", "osc-worker")
	e.create(t, first)
	orphan := e.waitRetention(t, "first", "").Status.Image
	// Its PoolImage goes: nothing refers to its image any more.
	if err := e.c.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("second") })
	second := e.retained("second", "osc-worker")
	second.Spec.Retention.Keep = new(int32(1))
	e.create(t, second)
	pi := e.waitRetention(t, "second", "")
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionRetention)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != controller.ReasonDeleteRefused || !strings.Contains(c.Message, "refuses DELETE") {
		t.Errorf("Retention condition %+v, want false, DeleteRefused", c)
	}
	if r := pi.Status.Retention; r.Deleted != 0 || r.WouldDelete != 1 {
		t.Errorf("status.retention %+v, want 0 deleted, 1 to delete", r)
	}
	if degraded(pi) {
		t.Errorf("a refused DELETE failed the build: %+v", pi.Status.Conditions)
	}
	if got := e.manifest(t, orphan[strings.LastIndex(orphan, "@")+1:]); got != http.StatusOK {
		t.Errorf("the earlier image %s: HTTP %d, want it kept", orphan, got)
	}
	if got := e.manifest(t, sigTag(orphan)); got != http.StatusOK {
		t.Errorf("the earlier image's .sig tag: HTTP %d, want it kept", got)
	}
}
