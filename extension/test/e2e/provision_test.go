package e2e

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/extension/pkg/nodeside"
	"github.com/oslayer/oslayer/sign"

	"github.com/oslayer/oslayer/extension/test/exttest"
)

// TestProvision: once the pool's reconcile OSC has a pool image, the
// provision OSC is Succeeded with the user data Secret (key cloud_config,
// named in status.cloudConfig.secretRef) holding what nodeside.UserData
// returns for it: the OSC's units and files and the pivot onto the pool
// image by digest, its signature enforced with the pool's key. A pool
// that has no reconcile OSC of the type gets the plain base's user data.
func TestProvision(t *testing.T) {
	e := exttest.New(t, exttest.Options{})
	e.StartManager(t, 2)
	ns := e.Shoot(t, "worker", "43.1")
	rec := exttest.OSC(ns, "osc-worker-original", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, e.Config(), "one")
	e.Create(t, rec)
	image := status(t, wait(t, e, rec, "Succeeded", succeeded)).Image

	prov := exttest.OSC(ns, "osc-worker-downloader", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeProvision, e.Config(), "one")
	e.Create(t, prov)
	want, werr := expectedUserData(t, e, prov, image)
	if werr != nil {
		t.Fatalf("nodeside.UserData: %v", werr)
	}
	if !bytes.Contains(want, []byte(nodeside.PivotUnit)) || !bytes.Contains(want, []byte(image[strings.LastIndex(image, "@")+1:])) {
		t.Fatalf("the expected user data has no %s pivoting onto %s", nodeside.PivotUnit, image)
	}
	got := wait(t, e, prov, "Succeeded", succeeded)
	cc := got.Status.CloudConfig
	if cc == nil {
		t.Fatal("no status.cloudConfig")
	}
	var s corev1.Secret
	if err := e.Client.Get(e.Ctx, client.ObjectKey{Namespace: cc.SecretRef.Namespace, Name: cc.SecretRef.Name}, &s); err != nil {
		t.Fatalf("status.cloudConfig.secretRef: %v", err)
	}
	ud := s.Data[extensionsv1alpha1.OperatingSystemConfigSecretDataKey]
	if len(ud) == 0 || !json.Valid(ud) {
		t.Fatalf("user data %q: want Ignition JSON", ud)
	}
	if !bytes.Equal(ud, want) {
		t.Fatalf("user data differs from nodeside.UserData's:\n%s\nwant\n%s", ud, want)
	}

	// A pool without a reconcile OSC of the type: the plain base, no
	// pivot (TestProvisionWaits: a pool whose reconcile OSC is building).
	// A reconcile OSC of another type, which no extension here
	// reconciles, is not waited for.
	other := exttest.OSC(ns, "osc-fresh-original", "fresh", extensionsv1alpha1.OperatingSystemConfigPurposeReconcile, e.Config(), "fresh")
	other.Spec.Type = "other-os"
	e.Create(t, other)
	fresh := exttest.OSC(ns, "osc-fresh-downloader", "fresh", extensionsv1alpha1.OperatingSystemConfigPurposeProvision, e.Config(), "fresh")
	e.Create(t, fresh)
	got = wait(t, e, fresh, "Succeeded", succeeded)
	if got.Status.CloudConfig == nil {
		t.Fatal("no status.cloudConfig")
	}
	want, err := nodeside.UserData(nodeside.Provision{OSC: fresh, Secrets: map[string]map[string][]byte{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Get(e.Ctx, client.ObjectKey{Namespace: ns, Name: got.Status.CloudConfig.SecretRef.Name}, &s); err != nil {
		t.Fatal(err)
	}
	if ud := s.Data[extensionsv1alpha1.OperatingSystemConfigSecretDataKey]; !bytes.Equal(ud, want) {
		t.Fatalf("user data without a pool image differs from nodeside.UserData's:\n%s\nwant\n%s", ud, want)
	}
}

// expectedUserData is nodeside.UserData of the provision OSC with the
// pool image and the trust files of the pool's key.
func expectedUserData(t *testing.T, e *exttest.Env, osc *extensionsv1alpha1.OperatingSystemConfig, image string) ([]byte, error) {
	t.Helper()
	d, err := name.NewDigest(image)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sign.Trust(d.Context().Name(), e.Key.Public, sign.TrustOptions{Pool: "worker", OSCType: exttest.Type, AcceptImages: nodeside.NodeImages(osc)})
	if err != nil {
		t.Fatal(err)
	}
	return nodeside.UserData(nodeside.Provision{OSC: osc, Secrets: map[string]map[string][]byte{}, Image: image,
		Policy: b.Files[0].Content, SigstoreConfig: b.Files[1].Content, PublicKey: b.Files[2].Content})
}
