package examples_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/test/k8senv"
)

// TestIndexedJobOnAPIServer applies examples/fleet/job.yaml with
// server-side apply to a real kube-apiserver (envtest: no kubelet or
// controllers, so no pod runs) next to the ConfigMap and Secrets it
// names, and checks what the API server stored: an Indexed Job with its
// completions, parallelism, backoffLimitPerIndex, maxFailedIndexes and a
// podFailurePolicy that fails an index on exit code 2 (bad input) in the oslayer
// container. The API server's own validation must also refuse the two
// mistakes the example avoids (a per-index backoff without Indexed
// completion, FailIndex without backoffLimitPerIndex), and applying the
// file again changes nothing.
func TestIndexedJobOnAPIServer(t *testing.T) {
	assets := k8senv.Assets(t)
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest (kube-apiserver and etcd from %s): %v", assets, err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const ns = "fleet"
	plan, err := os.ReadFile(filepath.Join("fleet", "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "oslayer-fleet-plan", Namespace: ns},
			Data: map[string]string{"fleet.yaml": string(plan)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "oslayer-registry", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "oslayer-signing", Namespace: ns},
			Data: map[string][]byte{"cosign.key": []byte("not a key"), "cosign.password": []byte("not a password")}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}

	raw, err := os.ReadFile(filepath.Join("fleet", "job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	job := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetNamespace(ns)
		return u
	}
	apply := func(u *unstructured.Unstructured, opts ...client.PatchOption) error {
		return c.Patch(ctx, u, client.Apply, append([]client.PatchOption{client.FieldOwner("oslayer-example-test"), client.ForceOwnership}, opts...)...)
	}
	if err := apply(job()); err != nil {
		t.Fatalf("server-side apply of job.yaml: %v", err)
	}
	var got batchv1.Job
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: job().GetName()}, &got); err != nil {
		t.Fatal(err)
	}
	s := got.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("stored completionMode %v, want Indexed", s.CompletionMode)
	}
	if s.Completions == nil || *s.Completions != 4 || s.Parallelism == nil || *s.Parallelism != 4 {
		t.Errorf("stored completions %v, parallelism %v; want 4 and 4", s.Completions, s.Parallelism)
	}
	if s.BackoffLimitPerIndex == nil || *s.BackoffLimitPerIndex != 2 || s.MaxFailedIndexes == nil || *s.MaxFailedIndexes != 4 {
		t.Errorf("stored backoffLimitPerIndex %v, maxFailedIndexes %v; want 2 and 4", s.BackoffLimitPerIndex, s.MaxFailedIndexes)
	}
	if p := s.PodFailurePolicy; p == nil || len(p.Rules) != 1 || p.Rules[0].Action != batchv1.PodFailurePolicyActionFailIndex ||
		p.Rules[0].OnExitCodes == nil || p.Rules[0].OnExitCodes.ContainerName == nil || *p.Rules[0].OnExitCodes.ContainerName != "oslayer" ||
		len(p.Rules[0].OnExitCodes.Values) != 1 || p.Rules[0].OnExitCodes.Values[0] != 2 {
		t.Errorf("stored podFailurePolicy %+v, want FailIndex on exit code 2 (bad input) of container oslayer", p)
	}
	// The API server took the Job as a Job: it generated the selector and
	// labelled the pod template with it.
	if s.Selector == nil || s.Template.Labels[batchv1.ControllerUidLabel] == "" {
		t.Errorf("selector %v, template labels %v: the API server did not default the Job", s.Selector, s.Template.Labels)
	}
	if args := strings.Join(s.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "fleet build /plan/fleet.yaml --shards 4") {
		t.Errorf("container args %q", args)
	}
	applied := false
	for _, m := range got.ManagedFields {
		applied = applied || (m.Manager == "oslayer-example-test" && m.Operation == metav1.ManagedFieldsOperationApply)
	}
	if !applied {
		t.Errorf("no server-side apply by oslayer-example-test in managedFields %+v", got.ManagedFields)
	}

	// Applying it again changes nothing.
	if err := apply(job()); err != nil {
		t.Fatal(err)
	}
	var again batchv1.Job
	if err := c.Get(ctx, client.ObjectKeyFromObject(&got), &again); err != nil {
		t.Fatal(err)
	}
	if again.Generation != got.Generation || again.ResourceVersion != got.ResourceVersion {
		t.Errorf("applying job.yaml again: generation %d → %d, resourceVersion %s → %s", got.Generation, again.Generation, got.ResourceVersion, again.ResourceVersion)
	}

	// What the API server refuses (dry run, under another name).
	for name, edit := range map[string]func(u *unstructured.Unstructured){
		"per-index backoff without Indexed completion": func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "NonIndexed", "spec", "completionMode")
			unstructured.RemoveNestedField(u.Object, "spec", "podFailurePolicy")
		},
		"FailIndex without backoffLimitPerIndex": func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "spec", "backoffLimitPerIndex")
			unstructured.RemoveNestedField(u.Object, "spec", "maxFailedIndexes")
		},
	} {
		u := job()
		u.SetName("refused")
		edit(u)
		if err := apply(u, client.DryRunAll); !apierrors.IsInvalid(err) {
			t.Errorf("%s: the API server answered %v, want Invalid", name, err)
		}
	}
}
