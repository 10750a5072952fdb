package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
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
	"github.com/gardener/gardener/pkg/extensions"

	"github.com/oslayer/oslayer/sign"

	"github.com/oslayer/oslayer/extension/charts"
	"github.com/oslayer/oslayer/extension/pkg/app"
	oscactuator "github.com/oslayer/oslayer/extension/pkg/controller/operatingsystemconfig"
	"github.com/oslayer/oslayer/extension/test/exttest"
)

// TestChart: the example ControllerRegistration and ControllerDeployment
// decode strictly as Gardener's types and register the extension's type
// for OperatingSystemConfig; the chart, rendered with Gardener's chart
// renderer and the ControllerDeployment's values, applies server-side to
// the API server (dry run), its Deployment's arguments are the binary's
// flags, the default configuration of the example's values loads and is
// mounted where --default-config reads it, and the manager running with
// only the chart's RBAC (as its ServiceAccount) and a default
// configuration whose key is a Secret of its namespace reconciles an OSC
// without providerConfig.
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
	for _, k := range []string{"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "ConfigMap", "Secret",
		"VerticalPodAutoscaler", "PodDisruptionBudget"} {
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
	checkDefaultConfig(t, objs, ns)
	// The manager as the chart's ServiceAccount, with a default
	// configuration whose signing key is a Secret of the extension's
	// namespace, builds an OSC without providerConfig.
	e.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pool-images-cosign", Namespace: ns},
		Data: map[string][]byte{sign.SecretKeyField: e.Key.Private, sign.SecretPasswordField: []byte(e.Password)}})
	file := writeFile(t, "default-config.yaml", "apiVersion: oslayer.os.extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfiguration\n"+
		"target: "+e.Host+"/os/{namespace}/{pool}\nbase: "+e.Base+"\nsigning: {keySecretRef: {name: pool-images-cosign}}\n")
	cfg := rest.CopyConfig(e.Cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":oslayer-os-extension"}
	e.StartManagerWith(t, cfg, 1, func(o *app.Options) { o.DefaultConfig, o.Namespace = file, ns })
	shoot := e.Shoot(t, "worker", "43.1")
	osc := exttest.OSC(shoot, "osc-worker-original", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, nil, "rbac")
	e.Create(t, osc)
	checkImage(t, e, wait(t, e, osc, "Succeeded as the chart's ServiceAccount", succeeded), shoot, "rbac")
	checkHeartbeat(t, e, ns)
}

// checkHeartbeat: Gardener's heartbeat controller, running with the
// chart's RBAC, keeps the Lease gardenlet checks in the extension's
// namespace.
func checkHeartbeat(t *testing.T, e *exttest.Env, ns string) {
	t.Helper()
	var lease coordinationv1.Lease
	exttest.Until(t, 30*time.Second, func() bool {
		return e.Client.Get(e.Ctx, client.ObjectKey{Namespace: ns, Name: extensions.HeartBeatResourceName}, &lease) == nil
	}, func() string { return "no Lease " + ns + "/" + extensions.HeartBeatResourceName })
	if h := lease.Spec.HolderIdentity; h == nil || *h != app.ExtensionName || lease.Spec.RenewTime == nil {
		t.Errorf("heartbeat Lease %+v: want holder %s and a renew time", lease.Spec, app.ExtensionName)
	}
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

// checkDefaultConfig checks the rendered default configuration: the
// ConfigMap's document loads as the extension loads it (strictly,
// validated), and the Deployment mounts it where --default-config reads it,
// with --namespace the release's.
func checkDefaultConfig(t *testing.T, objs []*unstructured.Unstructured, ns string) {
	t.Helper()
	var cm, dep *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			cm = o
		case "Deployment":
			dep = o
		}
	}
	doc, _, _ := unstructured.NestedString(cm.Object, "data", "default-config.yaml")
	d, err := oscactuator.LoadDefault(writeFile(t, "default-config.yaml", doc), ns)
	if err != nil {
		t.Fatalf("the chart's default configuration: %v\n%s", err, doc)
	}
	if d.Config.RegistrySecretRef == nil || d.Config.RegistrySecretRef.Namespace != ns {
		t.Errorf("the default configuration's registrySecretRef %+v: want one in %s", d.Config.RegistrySecretRef, ns)
	}
	spec, _, _ := unstructured.NestedMap(dep.Object, "spec", "template", "spec")
	var pod corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &pod); err != nil {
		t.Fatal(err)
	}
	c := pod.Containers[0]
	var opts app.Options
	fs := pflag.NewFlagSet("oslayer-os-extension", pflag.ContinueOnError)
	opts.AddFlags(fs)
	if err := fs.Parse(c.Args); err != nil || opts.Namespace != ns {
		t.Fatalf("Deployment args %v: %v, --namespace %q, want %s", c.Args, err, opts.Namespace, ns)
	}
	var mounted bool
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			mounted = mounted || v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == cm.GetName() &&
				opts.DefaultConfig == m.MountPath+"/default-config.yaml"
		}
	}
	if !mounted {
		t.Errorf("--default-config %q is not the ConfigMap %s mounted (%+v, %+v)", opts.DefaultConfig, cm.GetName(), c.VolumeMounts, pod.Volumes)
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
