package controller_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
)

// buildBindings applies the build pod's bindings of config/samples (its
// ServiceAccount, RoleBinding and ClusterRoleBindings) into the test's
// namespace, with config/ (its ClusterRoles) before them. The
// ClusterRoleBindings get the namespace as a suffix of their names.
func (e *env) buildBindings(t *testing.T) {
	t.Helper()
	e.apply(t, manifests(t, filepath.Join("..", "config")), func(u *unstructured.Unstructured) bool { return u.GetKind() == "Deployment" })
	var objs []*unstructured.Unstructured
	for _, u := range manifests(t, filepath.Join("..", "config", "samples")) {
		switch u.GetKind() {
		case "ServiceAccount", "RoleBinding", "ClusterRoleBinding":
		default:
			continue
		}
		if u.GetNamespace() != "" {
			u.SetNamespace(e.ns)
		} else {
			u.SetName(u.GetName() + "-" + e.ns)
		}
		subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
		for _, s := range subjects {
			if m := s.(map[string]any); m["kind"] == "ServiceAccount" {
				m["namespace"] = e.ns
			}
		}
		if subjects != nil {
			if err := unstructured.SetNestedSlice(u.Object, subjects, "subjects"); err != nil {
				t.Fatal(err)
			}
		}
		objs = append(objs, u)
	}
	if len(objs) < 3 {
		t.Fatalf("config/samples binds the build pod with %d objects, want its ServiceAccount, RoleBinding and ClusterRoleBinding", len(objs))
	}
	e.apply(t, objs, func(*unstructured.Unstructured) bool { return false })
	t.Cleanup(func() {
		for _, u := range objs {
			if u.GetKind() == "ClusterRoleBinding" {
				_ = e.c.Delete(context.Background(), u)
			}
		}
	})
}

// serviceAccountKubeconfig is a kubeconfig impersonating the
// ServiceAccount ns/name (its user and groups), as its token would
// authenticate.
func (e *env) serviceAccountKubeconfig(t *testing.T, ns, name string) (string, *rest.Config) {
	t.Helper()
	p := e.kubeconfig(t)
	kc, err := clientcmd.LoadFromFile(p)
	if err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + ns + ":" + name
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	for _, a := range kc.AuthInfos {
		a.Impersonate, a.ImpersonateGroups = user, groups
	}
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(e.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return p, cfg
}

// TestBuildPodRBAC plays the build pod of every source kind (documents,
// Gardener by Secret name, Gardener by label selector, OpenShift) as the
// build ServiceAccount with exactly the RBAC config/ grants and the
// bindings of config/samples (the real oslayer binary, impersonating the
// ServiceAccount): each pod reads its inputs, builds, pushes, signs and
// writes its result, denied nothing, and the PoolImage gets Ready with the
// signed digest. Least privilege: access reviews show the ServiceAccount
// cannot write Secrets, PoolImages or their status, nor read Secrets of
// another namespace.
func TestBuildPodRBAC(t *testing.T) {
	e := newEnv(t)
	e.buildBindings(t)
	e.runManager(t, func(o *controller.ManagerOptions) {
		o.BuildImage = buildImage
		o.JobArgs = []string{"--timeout", "60s"}
	})

	pool := e.ns // cluster-scoped: unique among the tests sharing the API server
	e.openShiftPool(t, pool, mcfgv1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(
		`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/oslayer/pool.conf","mode":420,"contents":{"source":"data:,openshift"}}]}}`)}})
	t.Cleanup(func() {
		_ = e.c.DeleteAllOf(context.Background(), &mcfgv1.MachineConfig{}, client.MatchingLabels{roleLabel: pool})
	})

	e.create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "docs", Namespace: e.ns},
		Data: map[string]string{"osc.yaml": string(oscSecret("documents")["osc.yaml"])}})
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-named", Namespace: e.ns}, Data: oscSecret("by name")})
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-labelled", Namespace: e.ns,
		Labels: map[string]string{"worker.gardener.cloud/pool": "labelled"}}, Data: oscSecret("by selector")})

	for _, c := range []struct {
		name string
		src  v1alpha1.Source
	}{
		{"documents", v1alpha1.Source{Documents: &v1alpha1.DocumentsSource{Objects: []v1alpha1.DocumentObject{{Kind: "ConfigMap", Name: "docs"}}}}},
		{"gardener-name", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-named"}}},
		{"gardener-selector", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"worker.gardener.cloud/pool": "labelled"}}}}},
		{"openshift", v1alpha1.Source{OpenShift: &v1alpha1.OpenShiftSource{MachineConfigPool: pool}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pi := e.poolImage(c.name, c.src)
			pi.Spec.Builder = v1alpha1.BuilderJob
			e.create(t, pi)
			job := e.waitJobs(t, c.name, 1)[0]
			sa := job.Spec.Template.Spec.ServiceAccountName
			if sa == "" {
				t.Fatalf("Job %s names no ServiceAccount", job.Name)
			}
			kubeconfig, _ := e.serviceAccountKubeconfig(t, e.ns, sa)
			out, err := e.playPodAs(t, &job, kubeconfig)
			if strings.Contains(strings.ToLower(out), "forbidden") {
				t.Errorf("the build pod as ServiceAccount %s was denied:\n%s", sa, out)
			}
			if err != nil {
				t.Fatalf("the build pod as ServiceAccount %s: %v", sa, err)
			}
			e.finishJob(t, &job, true)
			pi = e.wait(t, c.name, "Ready", ready)
			e.verify(t, pi.Status.Image)
		})
	}

	_, cfg := e.serviceAccountKubeconfig(t, e.ns, "oslayer-build")
	allowed := canI(t, cfg)
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Namespace: e.ns, Verb: "create", Resource: "secrets"},
		{Namespace: e.ns, Verb: "update", Resource: "secrets"},
		{Namespace: e.ns, Verb: "patch", Resource: "secrets"},
		{Namespace: e.ns, Verb: "delete", Resource: "secrets"},
		{Namespace: e.ns, Verb: "watch", Resource: "secrets"},
		{Namespace: "kube-system", Verb: "get", Resource: "secrets"},
		{Namespace: "kube-system", Verb: "list", Resource: "secrets"},
		{Verb: "list", Resource: "secrets"},
		{Namespace: e.ns, Verb: "create", Group: "oslayer.dev", Resource: "poolimages"},
		{Namespace: e.ns, Verb: "update", Group: "oslayer.dev", Resource: "poolimages"},
		{Namespace: e.ns, Verb: "patch", Group: "oslayer.dev", Resource: "poolimages"},
		{Namespace: e.ns, Verb: "delete", Group: "oslayer.dev", Resource: "poolimages"},
		{Namespace: e.ns, Verb: "update", Group: "oslayer.dev", Resource: "poolimages", Subresource: "status"},
		{Namespace: e.ns, Verb: "create", Resource: "pods"},
		{Namespace: e.ns, Verb: "create", Group: "batch", Resource: "jobs"},
		{Verb: "update", Group: "machineconfiguration.openshift.io", Resource: "machineconfigs"},
		// The pool's MachineConfigs are listed (by its selector), never
		// read one by one or watched.
		{Verb: "get", Group: "machineconfiguration.openshift.io", Resource: "machineconfigs"},
		{Verb: "watch", Group: "machineconfiguration.openshift.io", Resource: "machineconfigs"},
		{Verb: "list", Group: "machineconfiguration.openshift.io", Resource: "machineconfigpools"},
	} {
		if allowed(ra) {
			t.Errorf("the build ServiceAccount may %s %s %s/%s in %q: more than it needs", ra.Verb, ra.Group, ra.Resource, ra.Subresource, ra.Namespace)
		}
	}
}
