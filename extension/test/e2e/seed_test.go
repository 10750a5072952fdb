package e2e

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/version"
	vpav1 "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	resourcesv1alpha1 "github.com/gardener/gardener/pkg/apis/resources/v1alpha1"
	"github.com/gardener/gardener/pkg/chartrenderer"
	gardenerutils "github.com/gardener/gardener/pkg/utils/gardener"

	"github.com/oslayer/oslayer/extension/charts"
	"github.com/oslayer/oslayer/extension/pkg/app"
)

const seedNS = "extension-oslayer-os-extension"

// render renders the chart with Gardener's chart renderer as gardenlet
// does, into objects by kind.
func render(t *testing.T, values map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	r := chartrenderer.NewWithServerVersion(&version.Info{Major: "1", Minor: "36", GitVersion: "v1.36.3"})
	rc, err := r.RenderEmbeddedFS(charts.Chart, charts.ChartPath, "oslayer-os-extension", seedNS, values)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for _, o := range decodeAll(t, rc.Manifest()) {
		out[o.GetKind()] = o
	}
	return out
}

// into converts a rendered object into a typed one.
func into(t *testing.T, u *unstructured.Unstructured, obj any) {
	t.Helper()
	if u == nil {
		t.Fatalf("not rendered: %T", obj)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// TestChartSeedReady: with the example's values the chart is what a seed
// needs, checked against Gardener's own constants and helpers: the pod
// carries the network-policy labels for DNS, the runtime API server and
// public and private networks; the metrics Service carries exactly the
// annotations Gardener's helpers write for seed scrape targets in an
// extension namespace; the pod has Gardener's seed priority class, passes
// the pod security level the registrations ask for, and runs Gardener's
// heartbeat in its namespace; a VPA (Gardener's VPA types, strictly) and a
// PDB come with it, each turned off by its value.
func TestChartSeedReady(t *testing.T) {
	values := exampleValues(t)
	objs := render(t, values)
	var dep struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs["Deployment"].Object, &dep); err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template
	for _, l := range []string{v1beta1constants.LabelNetworkPolicyToDNS, v1beta1constants.LabelNetworkPolicyToRuntimeAPIServer,
		v1beta1constants.LabelNetworkPolicyToPublicNetworks, v1beta1constants.LabelNetworkPolicyToPrivateNetworks} {
		if pod.Labels[l] != v1beta1constants.LabelNetworkPolicyAllowed {
			t.Errorf("pod label %s = %q; want %q", l, pod.Labels[l], v1beta1constants.LabelNetworkPolicyAllowed)
		}
	}
	checkMetricsService(t, objs["Service"])
	if pod.Spec.PriorityClassName != v1beta1constants.PriorityClassNameSeedSystem900 {
		t.Errorf("priorityClassName %q; want %q", pod.Spec.PriorityClassName, v1beta1constants.PriorityClassNameSeedSystem900)
	}
	checkPodSecurity(t, pod)
	checkHeartbeatArgs(t, pod.Spec.Containers[0].Args)
	var vpa vpav1.VerticalPodAutoscaler
	into(t, objs["VerticalPodAutoscaler"], &vpa)
	if vpa.Spec.TargetRef == nil || vpa.Spec.TargetRef.Kind != "Deployment" || vpa.Spec.TargetRef.Name != objs["Deployment"].GetName() {
		t.Errorf("VPA targets %+v; want the Deployment", vpa.Spec.TargetRef)
	}
	var pdb struct {
		Spec struct {
			MaxUnavailable *intstr.IntOrString   `json:"maxUnavailable"`
			Selector       *metav1.LabelSelector `json:"selector"`
		} `json:"spec"`
	}
	if objs["PodDisruptionBudget"] == nil {
		t.Fatal("no PodDisruptionBudget")
	}
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(objs["PodDisruptionBudget"].Object, &pdb)
	if pdb.Spec.Selector == nil || !reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, selectorOf(t, objs["Deployment"])) {
		t.Errorf("PDB selector %+v does not select the Deployment's pods", pdb.Spec.Selector)
	}
	off := maps.Clone(values)
	off["vpa"], off["podDisruptionBudget"], off["priorityClassName"] = map[string]any{"enabled": false}, map[string]any{"enabled": false}, ""
	objs = render(t, off)
	if objs["VerticalPodAutoscaler"] != nil || objs["PodDisruptionBudget"] != nil {
		t.Error("vpa.enabled and podDisruptionBudget.enabled false: still rendered")
	}
	if pc, _, _ := unstructured.NestedString(objs["Deployment"].Object, "spec", "template", "spec", "priorityClassName"); pc != "" {
		t.Errorf("priorityClassName \"\": rendered %q", pc)
	}
}

func selectorOf(t *testing.T, dep *unstructured.Unstructured) map[string]string {
	t.Helper()
	m, _, err := unstructured.NestedStringMap(dep.Object, "spec", "selector", "matchLabels")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkMetricsService compares the metrics Service's network-policy
// annotations with those Gardener's helpers write for a seed scrape
// target in an extension namespace (docs/operations/network_policies.md).
func checkMetricsService(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	var svc corev1.Service
	into(t, u, &svc)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" {
		t.Fatalf("Service ports %+v; want metrics", svc.Spec.Ports)
	}
	want := &corev1.Service{}
	port := intstr.FromInt32(svc.Spec.Ports[0].Port)
	if err := gardenerutils.InjectNetworkPolicyAnnotationsForSeedScrapeTargets(want, networkingv1.NetworkPolicyPort{Port: &port, Protocol: ptr.To(corev1.ProtocolTCP)}); err != nil {
		t.Fatal(err)
	}
	if err := gardenerutils.InjectNetworkPolicyNamespaceSelectors(want, metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: v1beta1constants.GardenNamespace}}); err != nil {
		t.Fatal(err)
	}
	metav1.SetMetaDataAnnotation(&want.ObjectMeta, resourcesv1alpha1.NetworkingPodLabelSelectorNamespaceAlias, v1beta1constants.LabelNetworkPolicyExtensionsNamespaceAlias)
	for k, v := range want.Annotations {
		if !jsonEqual(svc.Annotations[k], v) {
			t.Errorf("Service annotation %s = %q; want %q", k, svc.Annotations[k], v)
		}
	}
}

// jsonEqual compares two annotation values as JSON when both are JSON,
// else as strings.
func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	return reflect.DeepEqual(x, y)
}

// checkPodSecurity: both registrations ask for the same pod security
// level (Gardener's annotation), and the pod passes it (the checks of
// k8s.io/pod-security-admission, as the API server enforces them).
func checkPodSecurity(t *testing.T, pod corev1.PodTemplateSpec) {
	t.Helper()
	reg := exampleAnnotations(t, "../../example/controller-registration.yaml", "ControllerRegistration")
	ext := exampleAnnotations(t, "../../example/extension.yaml", "Extension")
	level := reg[v1beta1constants.AnnotationPodSecurityEnforce]
	if level == "" || ext[v1beta1constants.AnnotationPodSecurityEnforce] != level {
		t.Fatalf("pod security level: ControllerRegistration %q, Extension %q", level, ext[v1beta1constants.AnnotationPodSecurityEnforce])
	}
	l, err := psaapi.ParseLevel(level)
	if err != nil {
		t.Fatal(err)
	}
	evaluatePod(t, l, pod)
}

// evaluatePod fails the test unless the pod passes the pod security
// level (the checks of k8s.io/pod-security-admission).
func evaluatePod(t *testing.T, l psaapi.Level, pod corev1.PodTemplateSpec) {
	t.Helper()
	ev, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ev.EvaluatePod(psaapi.LevelVersion{Level: l, Version: psaapi.LatestVersion()}, &pod.ObjectMeta, &pod.Spec) {
		if !r.Allowed {
			t.Errorf("pod security %s: %s: %s", l, r.ForbiddenReason, r.ForbiddenDetail)
		}
	}
}

// exampleAnnotations are the annotations of the example's object of kind.
func exampleAnnotations(t *testing.T, file, kind string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range decodeAll(t, b) {
		if u.GetKind() == kind {
			return u.GetAnnotations()
		}
	}
	t.Fatalf("%s has no %s", file, kind)
	return nil
}

// checkHeartbeatArgs parses the Deployment's arguments with the binary's
// flags: the heartbeat Lease is renewed in the release namespace.
func checkHeartbeatArgs(t *testing.T, args []string) {
	t.Helper()
	var opts app.Options
	fs := pflag.NewFlagSet("oslayer-os-extension", pflag.ContinueOnError)
	opts.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if opts.Heartbeat.Namespace != seedNS || opts.Heartbeat.RenewIntervalSeconds != 30 {
		t.Errorf("heartbeat in %q every %d s; want %s, 30 s", opts.Heartbeat.Namespace, opts.Heartbeat.RenewIntervalSeconds, seedNS)
	}
}

// TestExtensionExample: the operator.gardener.cloud Extension decodes
// strictly as Gardener's type, registers the same resource and carries
// the same chart and values as the ControllerDeployment example.
func TestExtensionExample(t *testing.T) {
	ext := exampleExtension(t)
	if len(ext.Spec.Resources) != 1 || ext.Spec.Resources[0].Kind != "OperatingSystemConfig" || ext.Spec.Resources[0].Type != app.DefaultType {
		t.Errorf("Extension resources %+v; want OperatingSystemConfig %s", ext.Spec.Resources, app.DefaultType)
	}
	d := ext.Spec.Deployment
	if d == nil || d.ExtensionDeployment == nil || d.ExtensionDeployment.Helm == nil || d.ExtensionDeployment.Helm.OCIRepository == nil || d.ExtensionDeployment.Values == nil {
		t.Fatal("Extension: want spec.deployment.extension.helm.ociRepository and values")
	}
	var values map[string]any
	if err := json.Unmarshal(d.ExtensionDeployment.Values.Raw, &values); err != nil {
		t.Fatal(err)
	}
	if want := exampleValues(t); !reflect.DeepEqual(values, want) {
		t.Errorf("Extension values %v; want the ControllerDeployment's %v", values, want)
	}
}
