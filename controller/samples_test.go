package controller_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// credentialPaths are where a node keeps credentials the platform
// delivers: an image that has one bakes a credential.
var credentialPaths = []string{
	"var/lib/kubelet/config.json", "usr/lib/oslayer/var/var/lib/kubelet/config.json",
	"etc/kubernetes/kubeconfig", "root/.docker/config.json", "usr/lib/oslayer/var/root/.docker/config.json",
}

// samplePullSecret is the pull secret the test's MachineConfigs carry,
// as every OpenShift rendered MachineConfig does.
const samplePullSecret = `{"auths":{"quay.io":{"auth":"c2FtcGxlOm5ldmVyLWJha2VkLWNyZWRlbnRpYWw="}}}`

// TestSamplesBakeNoCredential applies every PoolImage of config/samples
// that builds in the controller process as shipped (only its namespace,
// base, target and the pool's name moved to the test's), gives it the
// source it describes with the credentials a cluster has (an OpenShift
// pool's real rendered worker config with its pull secret; a ConfigMap
// of MachineConfigs with a pull secret; the node agent's OSC Secret),
// builds it, and checks that the image holds no credential: no file
// where a node keeps one, and no credential's content in any layer or
// the config. The Job-mode sample (a package stage: buildah in a pod) is
// checked as written: it names no credential to bake.
func TestSamplesBakeNoCredential(t *testing.T) {
	e := start(t)
	var built int
	for i, u := range manifests(t, filepath.Join("..", "config", "samples")) {
		if u.GetKind() != "PoolImage" {
			continue
		}
		t.Run(u.GetNamespace()+"/"+u.GetName(), func(t *testing.T) {
			// Samples in different namespaces share names: one
			// namespace here, a name each.
			u.SetName(fmt.Sprintf("s%d-%s", i, u.GetName()))
			noBakedCredential(t, u)
			if b, _, _ := unstructured.NestedString(u.Object, "spec", "builder"); b == v1alpha1.BuilderJob {
				return
			}
			built++
			e.buildSample(t, u.DeepCopy())
		})
	}
	if built < 3 {
		t.Errorf("built %d samples, want the Gardener, documents and OpenShift ones", built)
	}
}

// noBakedCredential checks that a sample asks for no credential in the
// image (spec.preflight.allowSecrets, spec.bakeSecrets).
func noBakedCredential(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	allowed, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "preflight", "allowSecrets")
	for _, a := range allowed {
		for _, p := range credentialPaths {
			if strings.TrimPrefix(a, "/") == p {
				t.Errorf("spec.preflight.allowSecrets names the credential %s: the image would bake it", a)
			}
		}
	}
	if bake, _, _ := unstructured.NestedBool(u.Object, "spec", "bakeSecrets"); bake {
		t.Error("spec.bakeSecrets is set: the image would bake the source's secrets")
	}
}

// buildSample gives the sample its source and Secrets in the test's
// namespace, builds it and checks its image.
func (e *env) buildSample(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	u.SetNamespace(e.ns)
	for field, v := range map[string]string{"base": e.base, "target": e.host + "/os/" + u.GetName() + ":latest"} {
		if err := unstructured.SetNestedField(u.Object, v, "spec", field); err != nil {
			t.Fatal(err)
		}
	}
	e.sampleSecrets(t, u)
	secrets := []string{samplePullSecret}
	switch {
	case has(u, "spec", "source", "openshift"):
		spec := realRendered(t)
		pool := e.ns + "-" + u.GetName()
		e.openShiftPool(t, pool, spec)
		if err := unstructured.SetNestedField(u.Object, pool, "spec", "source", "openshift", "machineConfigPool"); err != nil {
			t.Fatal(err)
		}
		defer func() { noPullSecret(t, e.get(t, u.GetName()).Status.Image, spec) }()
	case has(u, "spec", "source", "gardener"):
		pool, _, _ := unstructured.NestedString(u.Object, "spec", "pool")
		e.create(t, nodeAgentSecret(t, e.ns, pool, "67e806e018b7d00f", oscSecret("one")["osc.yaml"]))
	case has(u, "spec", "source", "documents"):
		e.sampleDocuments(t, u)
	default:
		t.Fatalf("a sample of an unknown source: %v", u.Object["spec"])
	}
	e.apply(t, []*unstructured.Unstructured{u}, func(*unstructured.Unstructured) bool { return false })
	pi := e.wait(t, u.GetName(), "the sample built", func(pi *v1alpha1.PoolImage) bool { return ready(pi) || degraded(pi) })
	if !ready(pi) {
		t.Fatalf("the sample did not build: %+v", pi.Status.Conditions)
	}
	files, blobs := imageFiles(t, pi.Status.Image)
	for _, p := range credentialPaths {
		if _, ok := files[p]; ok {
			t.Errorf("the image of the sample has the credential /%s", p)
		}
	}
	for _, s := range secrets {
		if strings.Contains(blobs, s) {
			t.Errorf("the image of the sample holds the credential %s", s)
		}
	}
}

// sampleSecrets creates the pull and push Secrets the sample names.
func (e *env) sampleSecrets(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	var names []string
	if push, _, _ := unstructured.NestedString(u.Object, "spec", "pushSecret", "name"); push != "" {
		names = append(names, push)
	}
	pulls, _, _ := unstructured.NestedSlice(u.Object, "spec", "pullSecrets")
	for _, p := range pulls {
		if m, ok := p.(map[string]any); ok {
			names = append(names, m["name"].(string))
		}
	}
	for _, n := range names {
		err := e.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: e.ns}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + e.host + `":{"auth":"dXNlcjpwYXNz"}}}`)}})
		if err != nil && !apierrors.IsAlreadyExists(err) { // the samples share Secret names
			t.Fatal(err)
		}
	}
}

// sampleDocuments creates the ConfigMaps the documents sample names, each
// with a MachineConfig that carries a file and the pull secret.
func (e *env) sampleDocuments(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	objs, _, _ := unstructured.NestedSlice(u.Object, "spec", "source", "documents", "objects")
	for _, o := range objs {
		m := o.(map[string]any)
		if m["kind"] != "ConfigMap" {
			t.Fatalf("the sample names a %v: only ConfigMaps are given here", m["kind"])
		}
		cfg := withFile(t, ignitionFile("/etc/oslayer/pool.conf", "sample"), "/var/lib/kubelet/config.json", samplePullSecret)
		mc := map[string]any{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
			"metadata": map[string]any{"name": "50-" + u.GetName(), "labels": map[string]any{roleLabel: u.GetName()}},
			"spec":     map[string]any{"config": cfg}}
		b, err := yaml.Marshal(mc)
		if err != nil {
			t.Fatal(err)
		}
		e.create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: m["name"].(string), Namespace: e.ns},
			Data: map[string]string{"machineconfig.yaml": string(b)}})
	}
}

func has(u *unstructured.Unstructured, path ...string) bool {
	_, ok, _ := unstructured.NestedMap(u.Object, path...)
	return ok
}
