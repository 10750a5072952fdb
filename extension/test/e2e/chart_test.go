package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gardencorev1 "github.com/gardener/gardener/pkg/apis/core/v1"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/gardener/gardener/pkg/chartrenderer"

	"github.com/oslayer/oslayer/extension/charts"
	"github.com/oslayer/oslayer/extension/pkg/app"
	"github.com/oslayer/oslayer/extension/test/exttest"
)

// TestChart: the example ControllerRegistration and ControllerDeployment
// decode strictly as Gardener's types and register the extension's type
// for OperatingSystemConfig; the chart, rendered with Gardener's chart
// renderer and the ControllerDeployment's values, applies server-side to
// the API server (dry run), its Deployment's arguments are the binary's
// flags, and the manager running with only the chart's RBAC (as its
// ServiceAccount) reconciles an OSC.
func TestChart(t *testing.T) {
	values := exampleValues(t)
	e := exttest.New(t, exttest.Options{})
	const ns = "extension-oslayer-os-extension"
	e.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	r := chartrenderer.NewWithServerVersion(&version.Info{Major: "1", Minor: "36", GitVersion: "v1.36.3"})
	rc, err := r.RenderEmbeddedFS(charts.Chart, charts.ChartPath, "oslayer-os-extension", ns, values)
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, rc.Manifest())
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
		if err := e.Client.Patch(e.Ctx, o.DeepCopy(), client.Apply, client.DryRunAll, client.FieldOwner("test"), client.ForceOwnership); err != nil {
			t.Errorf("server-side apply (dry run) of %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if o.GetKind() == "Deployment" {
			checkArgs(t, o)
		}
	}
	for _, k := range []string{"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("the chart has no %s (has %v)", k, kinds)
		}
	}
	// The chart's RBAC for real, and the manager as its ServiceAccount.
	for _, o := range objs {
		if strings.HasPrefix(o.GetAPIVersion(), "rbac.") || o.GetKind() == "ServiceAccount" {
			if err := e.Client.Patch(e.Ctx, o, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := rest.CopyConfig(e.Cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":oslayer-os-extension"}
	e.StartManagerAs(t, cfg, 1)
	shoot := e.Shoot(t, "worker", "43.1")
	osc := exttest.OSC(shoot, "osc-worker-original", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, e.Config(), "rbac")
	e.Create(t, osc)
	checkImage(t, e, wait(t, e, osc, "Succeeded as the chart's ServiceAccount", succeeded), shoot, "rbac")
}

// exampleValues decodes example/controller-registration.yaml strictly
// and returns the ControllerDeployment's chart values.
func exampleValues(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../example/controller-registration.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	if err := gardencorev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := gardencorev1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	dec := serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
	var values map[string]any
	var registered bool
	for _, u := range decodeAll(t, b) {
		j, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := dec.Decode(j, nil, nil)
		if err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		switch o := obj.(type) {
		case *gardencorev1.ControllerDeployment:
			if o.Helm == nil || o.Helm.OCIRepository == nil || o.Helm.Values == nil {
				t.Fatalf("ControllerDeployment %s: want helm.ociRepository and helm.values", o.Name)
			}
			if err := json.Unmarshal(o.Helm.Values.Raw, &values); err != nil {
				t.Fatal(err)
			}
		case *gardencorev1beta1.ControllerRegistration:
			for _, r := range o.Spec.Resources {
				registered = registered || r.Kind == extensionsv1alpha1.OperatingSystemConfigResource && r.Type == app.DefaultType
			}
		}
	}
	if !registered || values == nil || values["extensionType"] != app.DefaultType {
		t.Fatalf("the example registers OperatingSystemConfig %s: %v; values %v", app.DefaultType, registered, values)
	}
	return values
}

// decodeAll splits a YAML stream into objects.
func decodeAll(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// checkArgs parses the Deployment's arguments with the binary's flags.
func checkArgs(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("Deployment containers %v", cs)
	}
	args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	var opts app.Options
	fs := pflag.NewFlagSet("oslayer-os-extension", pflag.ContinueOnError)
	opts.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("Deployment args %v: %v", args, err)
	}
	if opts.Type != app.DefaultType || !opts.LeaderElection || opts.LeaderElectionNamespace == "" {
		t.Errorf("Deployment args %v: type %q, leader election %v in %q", args, opts.Type, opts.LeaderElection, opts.LeaderElectionNamespace)
	}
}
