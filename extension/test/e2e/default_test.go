package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/extension/pkg/nodeside"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
	"github.com/oslayer/oslayer/extension/pkg/app"
	"github.com/oslayer/oslayer/extension/test/exttest"
)

// extensionNamespace creates the extension's own namespace with the
// operator's Secrets: the registry's push credentials (pool-images-push)
// and a cosign key of its own (pool-images-cosign), which it returns.
func extensionNamespace(t *testing.T, e *exttest.Env, ns string) *sign.KeyPair {
	t.Helper()
	const password = "operator-password"
	kp, err := sign.GenerateKeyPair([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	e.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	e.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pool-images-push", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig(e)}})
	e.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pool-images-cosign", Namespace: ns},
		Data: map[string][]byte{sign.SecretKeyField: kp.Private, sign.SecretPasswordField: []byte(password)}})
	return kp
}

// writeFile writes a file under the test's temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDefaultConfig: with the operator's default configuration (target,
// registry credentials and signing key Secrets in the extension's
// namespace; a registry that requires the credentials), an OSC without
// providerConfig is built onto the default's base, pushed to the
// default's target with the extension namespace's credentials and
// signed with its key (not the shoot's), and new machines of its pool
// trust that key; a providerConfig that adds an
// images entry refines it (its base is built); a providerConfig that
// changes the target or the signing key, or names the extension's
// credentials, is refused naming its field and pushes nothing.
func TestDefaultConfig(t *testing.T) {
	e := exttest.New(t, exttest.Options{Registry: regtest.Config{User: "operator", Password: "push-password"}})
	const extNS = "extension-oslayer-default"
	opKey := extensionNamespace(t, e, extNS)
	file := writeFile(t, "default-config.yaml", `apiVersion: oslayer.os.extensions.gardener.cloud/v1alpha1
kind: OperatingSystemConfiguration
target: `+e.Host+`/os/{project}/{shoot}/{pool}
base: `+e.Base+`
registrySecretRef: {name: pool-images-push}
signing: {keySecretRef: {name: pool-images-cosign}}
`)
	// A second base, for the providerConfig's images entry.
	img, err := synth.FCOSBase(0.0002)
	if err != nil {
		t.Fatal(err)
	}
	other := e.Host + "/fcos/other:43.1"
	if _, err := synth.Push(e.Ctx, img, other, e.RegistryAuth()...); err != nil {
		t.Fatal(err)
	}
	e.StartManagerWith(t, e.Cfg, 2, func(o *app.Options) { o.DefaultConfig, o.Namespace = file, extNS })
	ns := e.Shoot(t, "worker", "43.1")
	shoot := strings.TrimPrefix(ns, "shoot--test--")
	const reconcile = extensionsv1alpha1.OperatingSystemConfigPurposeReconcile

	plain := exttest.OSC(ns, "osc-plain", "worker", reconcile, nil, "plain")
	// The refined pool is another shoot's (a shoot's version is its pool's).
	ns2 := e.Shoot(t, "worker", "43.1")
	refined := exttest.OSC(ns2, "osc-refined", "worker", reconcile, pcOf(`images: [{version: "43.1", base: "`+other+`"}]`), "refined")
	redirect := exttest.OSC(ns, "osc-redirect", "redirect", reconcile, pcOf(`target: "`+e.Host+`/elsewhere/{pool}"`), "x")
	steal := exttest.OSC(ns, "osc-steal", "steal", reconcile,
		pcOf(`target: "`+e.Host+`/elsewhere/{pool}"
registrySecretRef: {name: pool-images-push, namespace: `+extNS+`}`), "x")
	ownKey := exttest.OSC(ns, "osc-own-key", "ownkey", reconcile, pcOf(`signing: {keySecretRef: {name: cosign}}`), "x")
	for _, o := range []*extensionsv1alpha1.OperatingSystemConfig{plain, refined, redirect, steal, ownKey} {
		e.Create(t, o)
	}

	image := checkImageIn(t, e, wait(t, e, plain, "Succeeded", succeeded), e.Host+"/os/test/"+shoot+"/worker", e.Base, "plain", opKey.Public)
	if out, err := cosignVerifyKey(t, e, image, e.Key.Public); err == nil {
		t.Errorf("%s verifies with the shoot namespace's key, want only the extension namespace's:\n%s", image, out)
	}
	checkProvision(t, e, exttest.OSC(ns, "osc-plain-downloader", "worker", extensionsv1alpha1.OperatingSystemConfigPurposeProvision, nil, "plain"), image, opKey.Public)
	checkImageIn(t, e, wait(t, e, refined, "Succeeded", succeeded), e.Host+"/os/test/"+strings.TrimPrefix(ns2, "shoot--test--")+"/worker", other, "refined", opKey.Public)

	for _, c := range []struct {
		osc  *extensionsv1alpha1.OperatingSystemConfig
		want string
	}{
		{redirect, "spec.providerConfig.target: set by the extension's default configuration (--default-config " + file + ")"},
		{steal, `spec.providerConfig.registrySecretRef.namespace: "` + extNS + `" is the extension's own namespace`},
		{ownKey, "spec.providerConfig.signing: set with the target by the extension's default configuration (--default-config " + file + ") to " + extNS + "/pool-images-cosign"},
	} {
		le := wait(t, e, c.osc, "lastError", failed).Status.LastError
		if !strings.Contains(le.Description, c.want) || !slices.Contains(le.Codes, gardencorev1beta1.ErrorConfigurationProblem) {
			t.Errorf("%s: status.lastError %q %v: want %q with %s", c.osc.Name, le.Description, le.Codes, c.want, gardencorev1beta1.ErrorConfigurationProblem)
		}
	}
	catalog := e.Catalog(t)
	for _, repo := range catalog {
		if strings.HasPrefix(repo, "elsewhere/") || strings.HasSuffix(repo, "/ownkey") {
			t.Errorf("a refused OSC pushed %s", repo)
		}
	}
	if !slices.Contains(catalog, "os/test/"+shoot+"/worker") {
		t.Errorf("the registry's catalog %v lacks the default target's os/test/%s/worker", catalog, shoot)
	}
}

// checkProvision creates the provision OSC and checks its user data:
// nodeside.UserData's with the pivot onto image and the trust files
// of public key pub.
func checkProvision(t *testing.T, e *exttest.Env, osc *extensionsv1alpha1.OperatingSystemConfig, image string, pub []byte) {
	t.Helper()
	e.Create(t, osc)
	d, err := name.NewDigest(image)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sign.Trust(d.Context().Name(), pub, sign.TrustOptions{Pool: osc.Labels["worker.gardener.cloud/pool"], OSCType: exttest.Type, AcceptImages: nodeside.NodeImages(osc)})
	if err != nil {
		t.Fatal(err)
	}
	want, err := nodeside.UserData(nodeside.Provision{OSC: osc, Secrets: map[string]map[string][]byte{}, Image: image,
		Policy: b.Files[0].Content, SigstoreConfig: b.Files[1].Content, PublicKey: b.Files[2].Content})
	if err != nil {
		t.Fatal(err)
	}
	cc := wait(t, e, osc, "Succeeded", succeeded).Status.CloudConfig
	if cc == nil {
		t.Fatal("no status.cloudConfig")
	}
	var s corev1.Secret
	if err := e.Client.Get(e.Ctx, client.ObjectKey{Namespace: cc.SecretRef.Namespace, Name: cc.SecretRef.Name}, &s); err != nil {
		t.Fatal(err)
	}
	if ud := s.Data[extensionsv1alpha1.OperatingSystemConfigSecretDataKey]; !bytes.Equal(ud, want) {
		t.Fatalf("user data differs from nodeside.UserData's with the extension namespace's key:\n%s\nwant\n%s", ud, want)
	}
}

// pcOf is a providerConfig document (JSON) of the given YAML fields.
func pcOf(fields string) []byte {
	c, err := configv1alpha1.Decode([]byte("apiVersion: oslayer.os.extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfiguration\n" + fields))
	if err != nil {
		panic(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return b
}

// TestDefaultConfigInvalid: an invalid default configuration fails the
// extension's start (app.NewManager, as the binary starts) with the flag,
// the file and the field named.
func TestDefaultConfigInvalid(t *testing.T) {
	cfg := exttest.API(t)
	for _, c := range []struct{ doc, want string }{
		{"target: r.example/os/{pool}\nbaseImage: x\n", `strict decoding error: unknown field "baseImage"`},
		{"registrySecretRef: {name: push}\n", `registrySecretRef: Invalid value: "push": needs target`},
		{"target: r.example/os/{cluster}\n", "target: Invalid value"},
	} {
		file := writeFile(t, "default-config.yaml", "apiVersion: oslayer.os.extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfiguration\n"+c.doc)
		o := app.Options{Type: exttest.Type, MetricsAddr: "0", HealthAddr: "0", SkipNameValidation: true, DefaultConfig: file, Namespace: "ext"}
		_, err := app.NewManager(context.Background(), cfg, o)
		if err == nil || !strings.Contains(err.Error(), "--default-config "+file+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error naming --default-config %s and %s", c.doc, err, file, c.want)
		}
	}
	o := app.Options{Type: exttest.Type, MetricsAddr: "0", HealthAddr: "0", SkipNameValidation: true, DefaultConfig: filepath.Join(t.TempDir(), "none.yaml")}
	if _, err := app.NewManager(context.Background(), cfg, o); err == nil || !strings.Contains(err.Error(), "--default-config") {
		t.Errorf("a missing default configuration: %v", err)
	}
}
