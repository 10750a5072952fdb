package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
)

const osType = "fedora-coreos-bootc"

// shoot is a Shoot with one pool of image name whose providerConfig is pc
// (YAML-free JSON) and the Secret resource "cosign".
func shoot(name, pc string) *gardencorev1beta1.Shoot {
	s := &gardencorev1beta1.Shoot{
		TypeMeta:   metav1.TypeMeta{APIVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot"},
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "garden-dev"},
		Spec: gardencorev1beta1.ShootSpec{
			Resources: []gardencorev1beta1.NamedResourceReference{
				{Name: "cosign", ResourceRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "v1", Kind: "Secret", Name: "my-cosign"}},
				{Name: "cfg", ResourceRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "v1", Kind: "ConfigMap", Name: "my-cfg"}},
			},
			Provider: gardencorev1beta1.Provider{Type: "local", Workers: []gardencorev1beta1.Worker{{Name: "worker",
				Machine: gardencorev1beta1.Machine{Type: "m1", Image: &gardencorev1beta1.ShootMachineImage{Name: name, Version: ptr.To("43.1")}}}}},
		},
	}
	if pc != "" {
		s.Spec.Provider.Workers[0].Machine.Image.ProviderConfig = &runtime.RawExtension{Raw: []byte(pc)}
	}
	return s
}

// review posts an AdmissionReview of the Shoot to the webhook as the API
// server does and returns its response.
func review(t *testing.T, url string, op admissionv1.Operation, s *gardencorev1beta1.Shoot) *admissionv1.AdmissionResponse {
	t.Helper()
	return reviewUpdate(t, url, op, s, nil)
}

// reviewUpdate is review with the old object of an update (nil: none).
func reviewUpdate(t *testing.T, url string, op admissionv1.Operation, s, old *gardencorev1beta1.Shoot) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	ar := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: types.UID("u1"), Operation: op,
			Kind:     metav1.GroupVersionKind{Group: "core.gardener.cloud", Version: "v1beta1", Kind: "Shoot"},
			Resource: metav1.GroupVersionResource{Group: "core.gardener.cloud", Version: "v1beta1", Resource: "shoots"},
			Name:     s.Name, Namespace: s.Namespace, Object: runtime.RawExtension{Raw: raw}}}
	if old != nil {
		if ar.Request.OldObject.Raw, err = json.Marshal(old); err != nil {
			t.Fatal(err)
		}
	}
	body, err := json.Marshal(ar)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url+Path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil || out.Response.UID != "u1" {
		t.Fatalf("AdmissionReview response %+v: %v", out.Response, err)
	}
	return out.Response
}

// TestShootValidator: served as controller-runtime serves admission
// webhooks, the validator admits a Shoot whose pool of the OS type has a
// valid providerConfig naming its Secret through spec.resources, and
// refuses, naming the Shoot's field, an unknown field, an invalid target,
// a Secret that is not a resource of the shoot (or not a Secret), and a
// namespace; pools of other images and deletions are not its concern.
func TestShootValidator(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(Path, &webhook.Admission{Handler: &ShootValidator{Type: osType}})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	const pc = `"apiVersion":"oslayer.os.extensions.gardener.cloud/v1alpha1","kind":"OperatingSystemConfiguration","base":"quay.io/fedora/fedora-coreos:{version}","target":"registry.example/os/{project}/{shoot}/{pool}"`
	const fld = "spec.provider.workers[0].machine.image.providerConfig"
	for _, tc := range []struct {
		name, image, pc string
		op              admissionv1.Operation
		deny            string
	}{
		{"valid", osType, `{` + pc + `,"signing":{"keySecretRef":{"name":"cosign"}}}`, admissionv1.Create, ""},
		{"no providerConfig", osType, "", admissionv1.Create, ""},
		{"unknown field", osType, `{` + pc + `,"baseImage":"x"}`, admissionv1.Create, fld + `: Invalid value: "": strict decoding error: unknown field "baseImage"`},
		{"bad target", osType, `{"apiVersion":"oslayer.os.extensions.gardener.cloud/v1alpha1","kind":"OperatingSystemConfiguration","target":"registry.example/{cluster}"}`, admissionv1.Update, fld + ".target"},
		{"not a resource", osType, `{` + pc + `,"registrySecretRef":{"name":"my-push"}}`, admissionv1.Create, fld + `.registrySecretRef.name: Not found: "my-push (not a resource of the shoot`},
		{"not a Secret", osType, `{` + pc + `,"signing":{"keySecretRef":{"name":"cfg"}}}`, admissionv1.Create, fld + `.signing.keySecretRef.name: Invalid value: "cfg": the shoot's resource is a v1/ConfigMap`},
		{"namespace", osType, `{` + pc + `,"signing":{"keySecretRef":{"name":"cosign","namespace":"garden-dev"}}}`, admissionv1.Create, fld + ".signing.keySecretRef.namespace: Forbidden"},
		{"other image", "gardenlinux", `{"anything":"goes"}`, admissionv1.Create, ""},
		{"delete", osType, `{` + pc + `,"baseImage":"x"}`, admissionv1.Delete, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := review(t, srv.URL, tc.op, shoot(tc.image, tc.pc))
			msg := ""
			if r.Result != nil {
				msg = r.Result.Message
			}
			switch {
			case tc.deny == "" && !r.Allowed:
				t.Errorf("denied: %s", msg)
			case tc.deny != "" && (r.Allowed || !strings.Contains(msg, tc.deny)):
				t.Errorf("allowed %v, %q; want denied with %q", r.Allowed, msg, tc.deny)
			}
		})
	}
}

// TestShootValidatorUnchanged: an update that leaves the providerConfigs
// of the type and spec.resources as they were is admitted even when they
// are invalid (a Shoot from before the webhook can still be labelled,
// annotated or confirmed for deletion); one that changes the
// providerConfig (even to another invalid one) or the resources is
// validated.
func TestShootValidatorUnchanged(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(Path, &webhook.Admission{Handler: &ShootValidator{Type: osType}})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	const bad = `{"apiVersion":"oslayer.os.extensions.gardener.cloud/v1alpha1","kind":"OperatingSystemConfiguration","baseImage":"x"}`
	old := shoot(osType, bad)
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"confirmation.gardener.cloud/deletion": "true"}
	// The same JSON, formatted otherwise, is unchanged.
	relabelled.Spec.Provider.Workers[0].Machine.Image.ProviderConfig.Raw = []byte(strings.ReplaceAll(bad, ",", ", "))
	if r := reviewUpdate(t, srv.URL, admissionv1.Update, relabelled, old); !r.Allowed {
		t.Errorf("unchanged providerConfig denied: %+v", r.Result)
	}
	changed := old.DeepCopy()
	changed.Spec.Provider.Workers[0].Machine.Image.ProviderConfig.Raw = []byte(strings.Replace(bad, `"x"`, `"y"`, 1))
	moreResources := old.DeepCopy()
	moreResources.Spec.Resources = moreResources.Spec.Resources[:1]
	for name, s := range map[string]*gardencorev1beta1.Shoot{"providerConfig changed": changed, "resources changed": moreResources} {
		if r := reviewUpdate(t, srv.URL, admissionv1.Update, s, old); r.Allowed {
			t.Errorf("%s: admitted without validation", name)
		}
	}
}
