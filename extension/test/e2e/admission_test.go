package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/oslayer/oslayer/extension/pkg/admission"
	"github.com/oslayer/oslayer/extension/pkg/app"
	"github.com/oslayer/oslayer/extension/test/exttest"
)

// TestAdmissionServed: the binary's manager with --webhook-port and
// --webhook-cert-dir serves the Shoot admission webhook over TLS: an
// AdmissionReview of a Shoot whose pool of the extension's type has an
// unknown providerConfig field is denied naming the field, a valid one is
// admitted. (The Shoot API is Gardener's own API server's, which does not
// run here: the review is posted as it would post it.)
func TestAdmissionServed(t *testing.T) {
	e := exttest.New(t, exttest.Options{})
	dir, pool := t.TempDir(), x509.NewCertPool()
	pool.AddCert(exttest.ServingCert(t, dir))
	port := exttest.FreePort(t)
	e.StartManagerWith(t, e.Cfg, 1, func(o *app.Options) { o.WebhookPort, o.WebhookCertDir = port, dir })
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := "https://127.0.0.1:" + itoa(port) + admission.Path
	post := func(pc string) *admissionv1.AdmissionResponse {
		shoot := exttest.Cluster("shoot--test--a", "test", "a", "worker", "43.1")
		var s map[string]any
		if err := json.Unmarshal(shoot.Spec.Shoot.Raw, &s); err != nil {
			t.Fatal(err)
		}
		workers := s["spec"].(map[string]any)["provider"].(map[string]any)["workers"].([]any)
		workers[0].(map[string]any)["machine"].(map[string]any)["image"].(map[string]any)["providerConfig"] = json.RawMessage(pc)
		raw, _ := json.Marshal(s)
		body, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create,
				Kind: metav1.GroupVersionKind{Group: "core.gardener.cloud", Version: "v1beta1", Kind: "Shoot"}, Object: runtimeRaw(raw)}})
		var resp *http.Response
		var err error
		exttest.Until(t, 30*time.Second, func() bool {
			resp, err = c.Post(url, "application/json", bytes.NewReader(body))
			return err == nil
		}, func() string { return "webhook not served: " + err.Error() })
		defer resp.Body.Close()
		var out admissionv1.AdmissionReview
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
			t.Fatalf("AdmissionReview response: %v", err)
		}
		return out.Response
	}
	if r := post(`{"apiVersion":"oslayer.os.extensions.gardener.cloud/v1alpha1","kind":"OperatingSystemConfiguration","baseImage":"x"}`); r.Allowed ||
		!strings.Contains(r.Result.Message, `spec.provider.workers[0].machine.image.providerConfig: Invalid value: "": strict decoding error: unknown field "baseImage"`) {
		t.Errorf("unknown field: allowed %v, %+v", r.Allowed, r.Result)
	}
	if r := post(`{"apiVersion":"oslayer.os.extensions.gardener.cloud/v1alpha1","kind":"OperatingSystemConfiguration","base":"` + e.Base + `"}`); !r.Allowed {
		t.Errorf("valid providerConfig denied: %+v", r.Result)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func runtimeRaw(b []byte) runtime.RawExtension { return runtime.RawExtension{Raw: b} }
