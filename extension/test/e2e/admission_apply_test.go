package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"

	"github.com/oslayer/oslayer/extension/charts"
	"github.com/oslayer/oslayer/extension/pkg/app"
	"github.com/oslayer/oslayer/extension/test/exttest"
)

// TestAdmissionAtApply: the admission webhook as the charts deploy it,
// against a real kube-apiserver. The runtime chart's objects apply
// (dry run) as rendered; its Deployment
// arguments run the webhook (app.RunAdmission, as the binary runs it
// with --admission-only) with the rendered TLS Secret's certificate; the
// application chart's ValidatingWebhookConfiguration is applied as
// rendered, except that its URL's host is the test's loopback address
// (the runtime Service's DNS name resolves only in the runtime cluster;
// the scheme, path and CA are the chart's). Then creating a Shoot whose
// pool of the OS type has an unknown providerConfig field, or updating a
// valid one to an invalid target, is refused by the API server with the
// validator's message naming the field; a valid Shoot is created, and an
// update that leaves an (invalid) providerConfig as it was is admitted.
//
// Shoots are served by gardener-apiserver, which does not run here: a
// stand-in CustomResourceDefinition serves shoots.core.gardener.cloud
// (v1beta1, any content), and the test sets the label Gardener's
// ExtensionLabels admission plugin sets on a Shoot with a pool of the
// type, which the registration selects.
func TestAdmissionAtApply(t *testing.T) {
	cfg := exttest.API(t)
	c, err := exttest.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	installShootCRD(t, c)
	ext, certs := exampleExtension(t), newAdmissionCerts(t)
	values := admissionValues(t, ext, certs)
	rt := mustRender(t, ext, charts.AdmissionRuntimePath, values)
	dryRunApply(t, c, rt)
	port := startAdmission(t, rt)
	vwc := admissionWebhook(t, mustRender(t, ext, charts.AdmissionApplicationPath, values))
	u, err := url.Parse(ptr.Deref(vwc.Webhooks[0].ClientConfig.URL, ""))
	if err != nil || u.Scheme != "https" {
		t.Fatalf("webhook URL %v: %v", vwc.Webhooks[0].ClientConfig.URL, err)
	}
	u.Host = fmt.Sprintf("127.0.0.1:%d", port)
	vwc.Webhooks[0].ClientConfig.URL = ptr.To(u.String())
	ctx := context.Background()
	if err := c.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), vwc) })
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden-dev"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	const fld = "spec.provider.workers[0].machine.image.providerConfig"
	refused(t, c, shootObject(t, "bad", `{"baseImage":"x"}`, true), fld+`: Invalid value: "": strict decoding error: unknown field "baseImage"`)
	good := shootObject(t, "good", `{"base":"quay.io/fedora/fedora-coreos:{version}","target":"registry.example/os/{project}/{shoot}/{pool}",`+
		`"registrySecretRef":{"name":"push"}}`, true)
	if err := c.Create(ctx, good); err != nil {
		t.Fatalf("a valid Shoot refused: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), good) })
	setProviderConfig(t, good, `{"target":"registry.example/{cluster}"}`)
	if err := c.Update(ctx, good); err == nil || !strings.Contains(err.Error(), fld+".target") {
		t.Errorf("update to an invalid target: %v; want refused naming %s.target", err, fld)
	}
	// Without Gardener's label the Shoot has no pool of the type, as
	// far as the registration knows: it is not sent to the webhook.
	other := shootObject(t, "other", `{"baseImage":"x"}`, false)
	if err := c.Create(ctx, other); err != nil {
		t.Errorf("a Shoot without the OS type's label was sent to the webhook: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), other) })
	// Such a Shoot (one from before the webhook, say) once labelled can
	// still be updated as long as its providerConfig stays as it was.
	other.SetLabels(map[string]string{v1beta1constants.LabelExtensionOperatingSystemConfigTypePrefix + app.DefaultType: "true"})
	other.SetAnnotations(map[string]string{"confirmation.gardener.cloud/deletion": "true"})
	if err := c.Update(ctx, other); err != nil {
		t.Errorf("an update leaving the invalid providerConfig as it was: %v", err)
	}
}

// refused creates the Shoot until the registration is in effect (the
// API server picks up a new ValidatingWebhookConfiguration within a
// moment; a Shoot admitted before that is deleted) and checks the API
// server refuses it with want.
func refused(t *testing.T, c client.Client, shoot *unstructured.Unstructured, want string) {
	t.Helper()
	ctx := context.Background()
	var err error
	exttest.Until(t, 30*time.Second, func() bool {
		err = c.Create(ctx, shoot.DeepCopy())
		if err == nil {
			_ = c.Delete(ctx, shoot.DeepCopy())
		}
		return err != nil
	}, func() string { return "the Shoot " + shoot.GetName() + " is still admitted" })
	if !strings.Contains(err.Error(), `admission webhook "shoots.oslayer.os.extensions.gardener.cloud" denied the request`) || !strings.Contains(err.Error(), want) {
		t.Errorf("Shoot %s: %v; want the webhook's denial with %q", shoot.GetName(), err, want)
	}
}

// shootObject is a Shoot in garden-dev with a pool of the OS type whose
// providerConfig is pc (JSON fields besides apiVersion and kind), the
// Secret resource "push", and (labelled) Gardener's label of the type.
func shootObject(t *testing.T, name, pc string, labelled bool) *unstructured.Unstructured {
	s := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
		"metadata": map[string]any{"name": name, "namespace": "garden-dev"},
		"spec": map[string]any{
			"resources": []any{map[string]any{"name": "push", "resourceRef": map[string]any{"apiVersion": "v1", "kind": "Secret", "name": "my-push"}}},
			"provider": map[string]any{"type": "local", "workers": []any{map[string]any{"name": "worker",
				"machine": map[string]any{"type": "m1", "image": map[string]any{"name": app.DefaultType, "version": "43.1"}}}}},
		},
	}}
	if labelled {
		s.SetLabels(map[string]string{v1beta1constants.LabelExtensionOperatingSystemConfigTypePrefix + app.DefaultType: "true"})
	}
	setProviderConfig(t, s, pc)
	return s
}

// setProviderConfig sets the pool's providerConfig: an
// OperatingSystemConfiguration with the JSON fields pc.
func setProviderConfig(t *testing.T, s *unstructured.Unstructured, pc string) {
	t.Helper()
	var fields map[string]any
	if err := json.Unmarshal([]byte(pc), &fields); err != nil {
		t.Fatal(err)
	}
	fields["apiVersion"], fields["kind"] = "oslayer.os.extensions.gardener.cloud/v1alpha1", "OperatingSystemConfiguration"
	workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
	image := workers[0].(map[string]any)["machine"].(map[string]any)["image"].(map[string]any)
	image["providerConfig"] = fields
	if err := unstructured.SetNestedSlice(s.Object, workers, "spec", "provider", "workers"); err != nil {
		t.Fatal(err)
	}
}

// installShootCRD serves shoots.core.gardener.cloud v1beta1 with any
// content (a stand-in: gardener-apiserver serves Shoots in a garden).
func installShootCRD(t *testing.T, c client.Client) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "shoots.core.gardener.cloud"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "core.gardener.cloud", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "shoots", Singular: "shoot", Kind: "Shoot", ListKind: "ShootList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	ctx := context.Background()
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	exttest.Until(t, 30*time.Second, func() bool {
		var got apiextensionsv1.CustomResourceDefinition
		if c.Get(ctx, client.ObjectKeyFromObject(crd), &got) != nil {
			return false
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	}, func() string { return "the Shoot CRD is not established" })
}

// startAdmission runs the webhook as the runtime chart's Deployment runs
// it: its arguments, with the rendered TLS Secret as the certificate
// directory, on a free loopback port (the chart's port is the pod's);
// it returns the port once /readyz answers.
func startAdmission(t *testing.T, objs map[string]*unstructured.Unstructured) int {
	t.Helper()
	var dep appsv1.Deployment
	into(t, objs["Deployment"], &dep)
	o := parseArgs(t, dep.Spec.Template.Spec.Containers[0].Args)
	var sec corev1.Secret
	into(t, objs["Secret"], &sec)
	dir := t.TempDir()
	for k, v := range sec.Data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	health := exttest.FreePort(t)
	o.WebhookCertDir, o.WebhookHost, o.WebhookPort, o.HealthAddr = dir, "127.0.0.1", exttest.FreePort(t), fmt.Sprintf("127.0.0.1:%d", health)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.RunAdmission(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunAdmission: %v", err)
		}
	})
	exttest.Until(t, 30*time.Second, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, func() string { return "the admission webhook is not ready" })
	return o.WebhookPort
}

// dryRunApply applies the runtime chart's objects server-side (dry run)
// in their namespace, garden: the API server (with the VPA's CRD, as in a
// runtime cluster) accepts them as rendered.
func dryRunApply(t *testing.T, c client.Client, objs map[string]*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: admissionRuntimeNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := c.Patch(ctx, o.DeepCopy(), client.Apply, client.DryRunAll, client.FieldOwner("test"), client.ForceOwnership); err != nil {
			t.Errorf("server-side apply (dry run) of %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}
