package controller_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
)

// manifests reads the objects of the kustomization in dir (its
// resources, with its namespace set on namespaced objects as kubectl
// apply -k does). Every YAML file under dir that no kustomization lists is
// an error: a manifest the deployment would leave out.
func manifests(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kz struct {
		Namespace string   `json:"namespace"`
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(b, &kz); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	var out []*unstructured.Unstructured
	for _, r := range kz.Resources {
		f := filepath.Join(dir, r)
		listed[f] = true
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if kz.Namespace != "" && u.GetNamespace() != "" && u.GetNamespace() != kz.Namespace {
				t.Errorf("%s: %s %s in namespace %s, the kustomization sets %s", f, u.GetKind(), u.GetName(), u.GetNamespace(), kz.Namespace)
			}
			out = append(out, u)
		}
	}
	// Files of this kustomization's folder (not of a folder with its own).
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != dir {
			if _, err := os.Stat(filepath.Join(p, "kustomization.yaml")); err == nil {
				return filepath.SkipDir
			}
		}
		if !d.IsDir() && strings.HasSuffix(p, ".yaml") && d.Name() != "kustomization.yaml" && !listed[p] {
			t.Errorf("%s is in no kustomization", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// apply applies objs server-side (field owner oslayer-test); dryRun
// picks the ones that only go through validation and admission.
func (e *env) apply(t *testing.T, objs []*unstructured.Unstructured, dryRun func(*unstructured.Unstructured) bool) {
	t.Helper()
	for _, u := range objs {
		u = u.DeepCopy()
		opts := []client.PatchOption{client.FieldOwner("oslayer-test"), client.ForceOwnership}
		if dryRun(u) {
			opts = append(opts, client.DryRunAll)
		}
		if err := e.c.Patch(context.Background(), u, client.Apply, opts...); err != nil {
			t.Errorf("apply %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
}

// The controller's ServiceAccount, as config/ deploys it.
const saNS, saName = "oslayer-system", "oslayer-controller"

// asServiceAccount applies config/ (the Deployment dry-run) and returns a
// config that impersonates the controller's ServiceAccount: a manager
// run with it has exactly the RBAC config/ grants.
func (e *env) asServiceAccount(t *testing.T) *rest.Config {
	t.Helper()
	e.apply(t, manifests(t, filepath.Join("..", "config")), func(u *unstructured.Unstructured) bool { return u.GetKind() == "Deployment" })
	cfg := rest.CopyConfig(e.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + saNS + ":" + saName,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS, "system:authenticated"}}
	return cfg
}

// denied fails the test for every request the API server refused the
// managers (a "forbidden" in their log).
func (e *env) denied(t *testing.T) {
	t.Helper()
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("denied: %s", line)
		}
	}
}

// TestRBAC runs the controller as the ServiceAccount of config/ with
// exactly the RBAC config/ grants it (applied to the real API server, the
// client impersonating the ServiceAccount), watching every namespace with
// leader election as the Deployment does: it takes the lease, builds a
// signed image, hands it to a BootcNodePool, runs retention (dry run),
// records status and Events, creates a build Job and
// replaces it when it failed to run (deleting it and its result
// ConfigMap), and is denied nothing (no "forbidden" in its log). Least
// privilege: the ServiceAccount may not write Secrets, create or delete
// Pods, change Jobs, create, change or delete PoolImages, take leases
// outside its namespace, change Nodes or BootcNodes, nor create, delete
// or set the status of BootcNodePools (it updates their spec.image.ref),
// nor update, delete or set the status of MachineConfigPools (it patches
// them to pause one around a build Job).
func TestRBAC(t *testing.T) {
	e := newEnv(t)
	cfg := e.asServiceAccount(t)
	allowed := canI(t, cfg)
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Namespace: e.ns, Verb: "update", Group: "oslayer.dev", Resource: "poolimages", Subresource: "status"},
		{Namespace: e.ns, Verb: "watch", Resource: "secrets"},
		{Namespace: saNS, Verb: "update", Group: "coordination.k8s.io", Resource: "leases"},
		{Namespace: e.ns, Verb: "create", Group: "batch", Resource: "jobs"},
		{Namespace: e.ns, Verb: "delete", Group: "batch", Resource: "jobs"},
		{Verb: "update", Group: "node.bootc.dev", Resource: "bootcnodepools"},
		{Verb: "watch", Group: "node.bootc.dev", Resource: "bootcnodepools"},
		{Verb: "list", Group: "node.bootc.dev", Resource: "bootcnodes"},
		{Verb: "list", Resource: "nodes"},
		{Verb: "patch", Group: "machineconfiguration.openshift.io", Resource: "machineconfigpools"},
	} {
		if !allowed(ra) {
			t.Errorf("the ServiceAccount may not %s %s/%s in %s", ra.Verb, ra.Resource, ra.Subresource, ra.Namespace)
		}
	}
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Namespace: e.ns, Verb: "update", Resource: "secrets"},
		{Namespace: e.ns, Verb: "create", Resource: "secrets"},
		{Namespace: e.ns, Verb: "delete", Resource: "secrets"},
		{Namespace: e.ns, Verb: "create", Resource: "pods"},
		{Namespace: e.ns, Verb: "delete", Resource: "pods"},
		{Namespace: e.ns, Verb: "update", Group: "batch", Resource: "jobs"},
		{Namespace: e.ns, Verb: "patch", Group: "batch", Resource: "jobs"},
		{Namespace: e.ns, Verb: "update", Group: "batch", Resource: "jobs", Subresource: "status"},
		{Namespace: e.ns, Verb: "create", Group: "oslayer.dev", Resource: "poolimages"},
		{Namespace: e.ns, Verb: "update", Group: "oslayer.dev", Resource: "poolimages"},
		{Namespace: e.ns, Verb: "delete", Group: "oslayer.dev", Resource: "poolimages"},
		{Namespace: e.ns, Verb: "update", Group: "coordination.k8s.io", Resource: "leases"},
		{Namespace: "kube-system", Verb: "create", Group: "coordination.k8s.io", Resource: "leases"},
		{Verb: "update", Resource: "nodes"},
		{Verb: "patch", Resource: "nodes"},
		{Verb: "create", Group: "node.bootc.dev", Resource: "bootcnodepools"},
		{Verb: "delete", Group: "node.bootc.dev", Resource: "bootcnodepools"},
		{Verb: "update", Group: "node.bootc.dev", Resource: "bootcnodepools", Subresource: "status"},
		{Verb: "update", Group: "node.bootc.dev", Resource: "bootcnodes"},
		{Verb: "update", Group: "machineconfiguration.openshift.io", Resource: "machineconfigpools"},
		{Verb: "delete", Group: "machineconfiguration.openshift.io", Resource: "machineconfigpools"},
		{Verb: "update", Group: "machineconfiguration.openshift.io", Resource: "machineconfigpools", Subresource: "status"},
		{Verb: "update", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
		{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
	} {
		if allowed(ra) {
			t.Errorf("the ServiceAccount may %s %s %s in %q: more than it needs", ra.Verb, ra.Group, ra.Resource, ra.Namespace)
		}
	}

	started := time.Now().Truncate(time.Second)
	e.runManagerAs(t, cfg, func(o *controller.ManagerOptions) {
		o.Namespaces = nil
		o.LeaderElection = true
		o.LeaderElectionNamespace = saNS
		o.BuildImage = buildImage
	})
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("one")})
	// It hands the image to a BootcNodePool and runs retention (a dry
	// run: it reads every kind of reference).
	e.bootcPool(t, "quay.io/example/os:latest")
	worker := e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}})
	worker.Spec.Publish = &v1alpha1.Publish{BootcNodePool: e.ns}
	worker.Spec.Retention = &v1alpha1.Retention{Enabled: true, DryRun: true}
	e.create(t, worker)
	pi := e.wait(t, "worker", "Ready, handed off and retention run", func(pi *v1alpha1.PoolImage) bool {
		return ready(pi) && meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionBootcNodePool) &&
			meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionRetention)
	})
	e.verify(t, pi.Status.Image)

	// A build Job whose pod reported a run failure is replaced, its
	// result ConfigMap deleted.
	inJob := e.poolImage("in-job", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}})
	inJob.Spec.Builder = v1alpha1.BuilderJob
	e.create(t, inJob)
	job := e.waitJobs(t, "in-job", 1)[0]
	res, err := json.Marshal(controller.JobResult{SourcesDigest: job.Annotations[controller.AnnotationSourcesDigest], Step: "push", Message: "registry unavailable"})
	if err != nil {
		t.Fatal(err)
	}
	e.create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: e.ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
		Data: map[string]string{controller.ResultKey: string(res)}})
	e.finishJob(t, &job, false)
	e.waitRetry(t, &job, 2, time.Now())
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(&job), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the failed Job's result ConfigMap: %v, want it deleted", err)
	}

	var lease coordinationv1.Lease
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: saNS, Name: controller.LeaderElectionID}, &lease); err != nil {
		t.Errorf("the lease: %v", err)
	}
	// The build Events in the PoolImage's namespace, and leader
	// election's own (core) Event about the lease in the controller's.
	deadline := time.Now().Add(30 * time.Second)
	for len(e.events(t, "worker")["Built"]) == 0 || !leaderEvent(t, e, saNS, started) {
		if time.Now().After(deadline) {
			t.Errorf("Built event %d, leader election event %v: not written as the ServiceAccount",
				len(e.events(t, "worker")["Built"]), leaderEvent(t, e, saNS, started))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.denied(t)
}

// canI returns a check whether the user of cfg may do what the resource
// attributes say (a SelfSubjectAccessReview as that user).
func canI(t *testing.T, cfg *rest.Config) func(authorizationv1.ResourceAttributes) bool {
	t.Helper()
	c := newClient(t, cfg)
	return func(ra authorizationv1.ResourceAttributes) bool {
		t.Helper()
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}
		if err := c.Create(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
}

// leaderEvent reports whether leader election recorded its core Event
// about the lease in ns since the time given.
func leaderEvent(t *testing.T, e *env, ns string, since time.Time) bool {
	t.Helper()
	var list corev1.EventList
	if err := e.c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range list.Items {
		if ev.Reason == "LeaderElection" && ev.InvolvedObject.Name == controller.LeaderElectionID && !ev.LastTimestamp.Time.Before(since) {
			return true
		}
	}
	return false
}
