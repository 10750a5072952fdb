package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/version"
	vpav1 "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"

	gardencorev1 "github.com/gardener/gardener/pkg/apis/core/v1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	operatorv1alpha1 "github.com/gardener/gardener/pkg/apis/operator/v1alpha1"
	"github.com/gardener/gardener/pkg/chartrenderer"
	"github.com/gardener/gardener/pkg/utils"
	chartutils "github.com/gardener/gardener/pkg/utils/chart"
	gardenerutils "github.com/gardener/gardener/pkg/utils/gardener"

	"github.com/oslayer/oslayer/extension/charts"
	"github.com/oslayer/oslayer/extension/pkg/admission"
	"github.com/oslayer/oslayer/extension/pkg/app"
)

// The admission charts as gardener-operator installs them
// (pkg/operator/controller/extension/extension/admission in Gardener
// v1.149.3): the runtime chart in the runtime cluster's namespace garden,
// the application chart in the virtual garden's namespace
// extension-NAME, each with the release name NAME of the Extension.
const (
	admissionRuntimeNS = v1beta1constants.GardenNamespace
	admissionService   = "oslayer-os-extension-admission"
)

// admissionCerts is a test CA and a serving certificate it signed for the
// Service's DNS name and 127.0.0.1, in PEM.
type admissionCerts struct{ ca, cert, key string }

// newAdmissionCerts makes a CA and a serving certificate for the webhook
// Service in the runtime namespace (and 127.0.0.1, where the test serves it).
func newAdmissionCerts(t *testing.T) admissionCerts {
	t.Helper()
	caKey, caTmpl := ecKey(t), &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "oslayer test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key := ecKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: admissionService},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames:    []string{admissionService + "." + admissionRuntimeNS + ".svc", admissionService + "." + admissionRuntimeNS},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return admissionCerts{ca: pemOf("CERTIFICATE", caDER), cert: pemOf("CERTIFICATE", der), key: pemOf("EC PRIVATE KEY", kb)}
}

func ecKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pemOf(typ string, b []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}))
}

// exampleExtension decodes example/extension.yaml strictly as Gardener's
// operator type.
func exampleExtension(t *testing.T) *operatorv1alpha1.Extension {
	t.Helper()
	b, err := os.ReadFile("../../example/extension.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	if err := operatorv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	obj, _, err := serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ext, ok := obj.(*operatorv1alpha1.Extension)
	if !ok {
		t.Fatalf("%T; want an Extension", obj)
	}
	return ext
}

// admissionValues are the example Extension's admission values with its
// resource templates resolved as gardener-operator resolves them
// (chartutils.SubstituteTemplateInValues) from the Secret holding certs.
func admissionValues(t *testing.T, ext *operatorv1alpha1.Extension, c admissionCerts) map[string]any {
	t.Helper()
	a := ext.Spec.Deployment.AdmissionDeployment
	if a == nil || a.Values == nil {
		t.Fatal("Extension: no spec.deployment.admission.values")
	}
	var values map[string]any
	if err := json.Unmarshal(a.Values.Raw, &values); err != nil {
		t.Fatal(err)
	}
	if len(ext.Spec.Deployment.Resources) != 1 {
		t.Fatalf("Extension spec.deployment.resources %+v: want the TLS Secret", ext.Spec.Deployment.Resources)
	}
	res := chartutils.Resources{ext.Spec.Deployment.Resources[0].Name: {Data: map[string]string{"cert": c.cert, "key": c.key, "ca": c.ca}}}
	values, err := chartutils.SubstituteTemplateInValues(values, res)
	if err != nil {
		t.Fatal(err)
	}
	return values
}

// renderAdmission renders the admission chart at path with Gardener's
// chart renderer, with the values gardener-operator adds for that chart.
func renderAdmission(t *testing.T, ext *operatorv1alpha1.Extension, path string, values map[string]any) (map[string]*unstructured.Unstructured, error) {
	t.Helper()
	ns, gardener := admissionRuntimeNS, map[string]any{
		"runtimeCluster": map[string]any{"priorityClassName": v1beta1constants.PriorityClassNameGardenSystem400},
		"virtualCluster": map[string]any{"enabled": true, "namespace": "extension-" + ext.Name},
	}
	if path == charts.AdmissionApplicationPath {
		ns, gardener = "extension-"+ext.Name, map[string]any{"virtualCluster": map[string]any{"enabled": true,
			"serviceAccount": map[string]any{"name": "extension-admission-" + ext.Name, "namespace": "kube-system"}}}
	}
	r := chartrenderer.NewWithServerVersion(&version.Info{Major: "1", Minor: "36", GitVersion: "v1.36.3"})
	rc, err := r.RenderEmbeddedFS(charts.Admission, path, ext.Name, ns, utils.MergeMaps(values, map[string]any{"gardener": gardener}))
	if err != nil {
		return nil, err
	}
	out := map[string]*unstructured.Unstructured{}
	for _, o := range decodeAll(t, rc.Manifest()) {
		if out[o.GetKind()] != nil {
			t.Fatalf("two %s objects: %s, %s", o.GetKind(), out[o.GetKind()].GetName(), o.GetName())
		}
		out[o.GetKind()] = o
	}
	return out, nil
}

func mustRender(t *testing.T, ext *operatorv1alpha1.Extension, path string, values map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	objs, err := renderAdmission(t, ext, path, values)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return objs
}

// TestAdmissionCharts: the example Extension deploys the admission
// webhook (its value templates name declared resources); its
// runtime chart runs the binary in admission mode with the serving
// certificate of the referenced Secret, a Service whose ingress
// annotation is what Gardener's helper writes for webhook servers, pod
// security restricted, Gardener's garden priority class, no API access,
// a VPA and a PDB; its application chart registers exactly one
// validating webhook for CREATE and UPDATE of v1beta1 Shoots labelled with
// the OS type, called at the runtime Service's URL and path with the CA.
func TestAdmissionCharts(t *testing.T) {
	ext := exampleExtension(t)
	a := ext.Spec.Deployment.AdmissionDeployment
	if a == nil {
		t.Fatal("Extension: no spec.deployment.admission")
	}
	// Every template of the values names a declared resource, as
	// Gardener's validation of an Extension requires.
	names, err := chartutils.ResourceNamesFromValues(a.Values)
	if err != nil || names.Len() == 0 {
		t.Fatalf("admission values' resource templates %v: %v", names, err)
	}
	for n := range names {
		if !slices.ContainsFunc(ext.Spec.Deployment.Resources, func(r gardencorev1.NamedResourceReference) bool { return r.Name == n }) {
			t.Errorf("admission values name resource %q, which spec.deployment.resources does not declare", n)
		}
	}
	for name, d := range map[string]*operatorv1alpha1.DeploymentSpec{"runtimeCluster": a.RuntimeCluster, "virtualCluster": a.VirtualCluster} {
		if d == nil || d.Helm == nil || d.Helm.OCIRepository == nil {
			t.Errorf("Extension spec.deployment.admission.%s: want helm.ociRepository", name)
		}
	}
	certs := newAdmissionCerts(t)
	values := admissionValues(t, ext, certs)
	if values["extensionType"] != app.DefaultType {
		t.Errorf("admission values extensionType %v; want %s", values["extensionType"], app.DefaultType)
	}
	rt := mustRender(t, ext, charts.AdmissionRuntimePath, values)
	opts, pod := checkAdmissionRuntime(t, rt, certs)
	port := checkAdmissionService(t, rt["Service"], pod)
	vwc := admissionWebhook(t, mustRender(t, ext, charts.AdmissionApplicationPath, values))
	checkWebhookConfig(t, vwc, opts.Type, certs)
	if want := "https://" + rt["Service"].GetName() + "." + admissionRuntimeNS + ".svc:" + strconv.Itoa(int(port)) + admission.Path; ptr.Deref(vwc.Webhooks[0].ClientConfig.URL, "") != want {
		t.Errorf("webhook URL %q; want the runtime Service's %q", ptr.Deref(vwc.Webhooks[0].ClientConfig.URL, ""), want)
	}
	checkAdmissionOff(t, ext, values, rt["Service"].GetName(), port)
}

// checkAdmissionRuntime checks the runtime chart's Deployment: its
// arguments are the binary's admission mode for the OS type, the TLS
// Secret (the referenced certificate) is mounted where --webhook-cert-dir
// reads it; it returns the parsed options and the pod.
func checkAdmissionRuntime(t *testing.T, objs map[string]*unstructured.Unstructured, c admissionCerts) (app.Options, corev1.PodTemplateSpec) {
	t.Helper()
	var dep appsv1.Deployment
	into(t, objs["Deployment"], &dep)
	pod := dep.Spec.Template
	o := parseArgs(t, pod.Spec.Containers[0].Args)
	if !o.AdmissionOnly || o.Type != app.DefaultType || o.WebhookPort <= 0 {
		t.Errorf("Deployment args %v: admission-only %v, type %q, webhook port %d", pod.Spec.Containers[0].Args, o.AdmissionOnly, o.Type, o.WebhookPort)
	}
	var sec corev1.Secret
	into(t, objs["Secret"], &sec)
	if string(sec.Data[corev1.TLSCertKey]) != c.cert || string(sec.Data[corev1.TLSPrivateKeyKey]) != c.key {
		t.Error("the TLS Secret does not hold the referenced Secret's certificate and key")
	}
	var mounted bool
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			mounted = mounted || v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == sec.Name && m.MountPath == o.WebhookCertDir
		}
	}
	if !mounted {
		t.Errorf("--webhook-cert-dir %q is not the Secret %s mounted", o.WebhookCertDir, sec.Name)
	}
	checkAdmissionPod(t, pod, objs)
	return o, pod
}

// checkAdmissionPod: restricted pod security, Gardener's garden priority
// class, no service account token and no egress label (it reads
// nothing), a VPA targeting the Deployment and a PDB selecting its pods.
func checkAdmissionPod(t *testing.T, pod corev1.PodTemplateSpec, objs map[string]*unstructured.Unstructured) {
	t.Helper()
	evaluatePod(t, psaapi.LevelRestricted, pod)
	if pod.Spec.PriorityClassName != v1beta1constants.PriorityClassNameGardenSystem400 {
		t.Errorf("priorityClassName %q; want %q", pod.Spec.PriorityClassName, v1beta1constants.PriorityClassNameGardenSystem400)
	}
	if ptr.Deref(pod.Spec.AutomountServiceAccountToken, true) {
		t.Error("the webhook reads no API: automountServiceAccountToken must be false")
	}
	for l := range pod.Labels {
		if strings.HasPrefix(l, "networking.gardener.cloud/to-") || strings.HasPrefix(l, "networking.resources.gardener.cloud/to-") {
			t.Errorf("pod label %s: the webhook makes no connection", l)
		}
	}
	for _, k := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		if objs[k] != nil {
			t.Errorf("the runtime chart has a %s; the webhook reads nothing", k)
		}
	}
	var vpa vpav1.VerticalPodAutoscaler
	into(t, objs["VerticalPodAutoscaler"], &vpa)
	if vpa.Spec.TargetRef == nil || vpa.Spec.TargetRef.Kind != "Deployment" || vpa.Spec.TargetRef.Name != objs["Deployment"].GetName() {
		t.Errorf("VPA targets %+v; want the Deployment", vpa.Spec.TargetRef)
	}
	sel, _, _ := unstructured.NestedStringMap(objs["PodDisruptionBudget"].Object, "spec", "selector", "matchLabels")
	if !reflect.DeepEqual(sel, selectorOf(t, objs["Deployment"])) {
		t.Errorf("PDB selector %v does not select the Deployment's pods", sel)
	}
}

// checkAdmissionService: the Service sends its port to the container's
// webhook port, and carries exactly the annotation Gardener's
// InjectNetworkPolicyAnnotationsForWebhookTargets writes for that port
// (the virtual garden's API servers run in the same namespace); it
// returns the Service's port.
func checkAdmissionService(t *testing.T, u *unstructured.Unstructured, pod corev1.PodTemplateSpec) int32 {
	t.Helper()
	var svc corev1.Service
	into(t, u, &svc)
	o := parseArgs(t, pod.Spec.Containers[0].Args)
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service ports %+v", svc.Spec.Ports)
	}
	var target int32
	for _, p := range pod.Spec.Containers[0].Ports {
		if p.Name == svc.Spec.Ports[0].TargetPort.StrVal || p.ContainerPort == svc.Spec.Ports[0].TargetPort.IntVal {
			target = p.ContainerPort
		}
	}
	if int(target) != o.WebhookPort {
		t.Errorf("Service targets container port %d; the webhook listens on %d", target, o.WebhookPort)
	}
	want := &corev1.Service{}
	wp := intstr.FromInt32(target)
	if err := gardenerutils.InjectNetworkPolicyAnnotationsForWebhookTargets(want, networkingv1.NetworkPolicyPort{Port: &wp, Protocol: ptr.To(corev1.ProtocolTCP)}); err != nil {
		t.Fatal(err)
	}
	if len(svc.Annotations) != len(want.Annotations) {
		t.Errorf("Service annotations %v; want %v", svc.Annotations, want.Annotations)
	}
	for k, v := range want.Annotations {
		if !jsonEqual(svc.Annotations[k], v) {
			t.Errorf("Service annotation %s = %q; want %q", k, svc.Annotations[k], v)
		}
	}
	return svc.Spec.Ports[0].Port
}

// admissionWebhook decodes the application chart's only object, the
// ValidatingWebhookConfiguration, strictly.
func admissionWebhook(t *testing.T, objs map[string]*unstructured.Unstructured) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	if len(objs) != 1 {
		t.Errorf("the application chart renders %d objects; want the ValidatingWebhookConfiguration alone (no RBAC: the webhook reads nothing)", len(objs))
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	into(t, objs["ValidatingWebhookConfiguration"], &vwc)
	if len(vwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks; want 1", len(vwc.Webhooks))
	}
	return &vwc
}

// checkWebhookConfig: CREATE and UPDATE of v1beta1 Shoots (Equivalent:
// other versions converted), labelled by Gardener for the OS type, no
// side effects, AdmissionReview v1, Fail, 10 s, the test CA.
func checkWebhookConfig(t *testing.T, vwc *admissionregistrationv1.ValidatingWebhookConfiguration, osType string, c admissionCerts) {
	t.Helper()
	w := vwc.Webhooks[0]
	want := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"core.gardener.cloud"}, APIVersions: []string{"v1beta1"}, Resources: []string{"shoots"},
			Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
	}}
	if !reflect.DeepEqual(w.Rules, want) {
		t.Errorf("rules %+v; want %+v", w.Rules, want)
	}
	sel := map[string]string{v1beta1constants.LabelExtensionOperatingSystemConfigTypePrefix + osType: "true"}
	if w.ObjectSelector == nil || !reflect.DeepEqual(w.ObjectSelector.MatchLabels, sel) || len(w.ObjectSelector.MatchExpressions) > 0 || w.NamespaceSelector != nil {
		t.Errorf("objectSelector %+v, namespaceSelector %+v; want Gardener's label %v only", w.ObjectSelector, w.NamespaceSelector, sel)
	}
	if ptr.Deref(w.SideEffects, "") != admissionregistrationv1.SideEffectClassNone || !reflect.DeepEqual(w.AdmissionReviewVersions, []string{"v1"}) ||
		ptr.Deref(w.FailurePolicy, "") != admissionregistrationv1.Fail || ptr.Deref(w.MatchPolicy, "") != admissionregistrationv1.Equivalent ||
		ptr.Deref(w.TimeoutSeconds, 0) != 10 {
		t.Errorf("webhook %s: sideEffects %v, versions %v, failurePolicy %v, matchPolicy %v, timeout %v", w.Name,
			ptr.Deref(w.SideEffects, ""), w.AdmissionReviewVersions, ptr.Deref(w.FailurePolicy, ""), ptr.Deref(w.MatchPolicy, ""), ptr.Deref(w.TimeoutSeconds, 0))
	}
	if string(w.ClientConfig.CABundle) != c.ca {
		t.Error("caBundle is not the referenced Secret's CA")
	}
}

// checkAdmissionOff: without a virtual garden (the webhook in the garden
// cluster itself) the registration names the Service; without the TLS
// values neither chart renders, naming the value.
func checkAdmissionOff(t *testing.T, ext *operatorv1alpha1.Extension, values map[string]any, svc string, port int32) {
	t.Helper()
	r := chartrenderer.NewWithServerVersion(&version.Info{Major: "1", Minor: "36", GitVersion: "v1.36.3"})
	rc, err := r.RenderEmbeddedFS(charts.Admission, charts.AdmissionApplicationPath, ext.Name, "garden",
		utils.MergeMaps(values, map[string]any{"gardener": map[string]any{"virtualCluster": map[string]any{"enabled": false}}}))
	if err != nil {
		t.Fatal(err)
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	into(t, decodeAll(t, rc.Manifest())[0], &vwc)
	want := &admissionregistrationv1.ServiceReference{Namespace: admissionRuntimeNS, Name: svc, Port: ptr.To(port), Path: ptr.To(admission.Path)}
	if cc := vwc.Webhooks[0].ClientConfig; cc.URL != nil || !reflect.DeepEqual(cc.Service, want) {
		t.Errorf("without a virtual garden: clientConfig url %v, service %+v; want service %+v", cc.URL, cc.Service, want)
	}
	noTLS := utils.MergeMaps(values, map[string]any{"webhook": map[string]any{"tls": map[string]any{"cert": "", "key": "", "caBundle": ""}}})
	for path, want := range map[string]string{charts.AdmissionRuntimePath: "webhook.tls.cert", charts.AdmissionApplicationPath: "webhook.tls.caBundle"} {
		if _, err := renderAdmission(t, ext, path, noTLS); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s without TLS values: %v; want an error naming %s", path, err, want)
		}
	}
}

// parseArgs parses container arguments with the binary's flags.
func parseArgs(t *testing.T, args []string) app.Options {
	t.Helper()
	var o app.Options
	fs := pflag.NewFlagSet("oslayer-os-extension", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("args %v: %v", args, err)
	}
	return o
}
