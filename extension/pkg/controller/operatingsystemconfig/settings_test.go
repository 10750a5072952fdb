package operatingsystemconfig

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
	buildsettings "github.com/oslayer/oslayer/pipeline/settings"
)

// TestTargetOf: the placeholders are replaced and the tag defaults to
// the version, made a valid tag.
func TestTargetOf(t *testing.T) {
	values := map[string]string{configv1alpha1.PlaceholderNamespace: "shoot--p--s", configv1alpha1.PlaceholderPool: "worker",
		configv1alpha1.PlaceholderVersion: "1.2.3+build", configv1alpha1.PlaceholderShoot: "s", configv1alpha1.PlaceholderProject: "p"}
	for _, tc := range []struct{ pattern, want string }{
		{"r.example/os/{namespace}/{pool}", "r.example/os/shoot--p--s/worker:1.2.3_build"},
		{"r.example/{project}/{shoot}-{pool}:v{version}", ""},
		{"r.example:5000/{project}/{shoot}-{pool}:stable", "r.example:5000/p/s-worker:stable"},
	} {
		got, _, err := targetOf(tc.pattern, fieldProviderConfig+".target", values)
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), "spec.providerConfig.target") {
				t.Errorf("%s: %q, %v: want an error naming spec.providerConfig.target", tc.pattern, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.pattern, got, err, tc.want)
		}
	}
}

// decodeTest decodes a configuration document without apiVersion and kind.
func decodeTest(t *testing.T, doc string) *configv1alpha1.OperatingSystemConfiguration {
	t.Helper()
	c, err := configv1alpha1.Decode([]byte("apiVersion: oslayer.os.extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfiguration\n" + doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRefine: a providerConfig refines the default field by field:
// strings, objects and lists it sets replace the default's, images merge
// by version, booleans are true when either sets them, preflight is
// refined field by field; neither input changes.
func TestRefine(t *testing.T) {
	d := decodeTest(t, `target: r.example/os/{namespace}/{pool}
base: b.example/fcos:{version}
images: [{version: "1", base: "b.example/one"}, {version: "2", base: "b.example/two"}]
arch: [amd64, arm64]
strict: true
registrySecretRef: {name: push, namespace: ext}
signing: {keySecretRef: {name: cosign, namespace: ext}}
preflight: {skip: [layers], maxAddedBytes: 500Mi, expectVersion: "{version}"}
`)
	pc := decodeTest(t, `images: [{version: "2", base: "b.example/two-shoot"}, {version: "3", base: "b.example/three"}]
arch: [amd64]
bakeSecrets: true
preflight: {maxAddedBytes: 1Gi, fatalWarnings: true}
`)
	dBefore, pcBefore := d.DeepCopy(), pc.DeepCopy()
	got := refine(d, pc)
	want := d.DeepCopy()
	want.Images = []configv1alpha1.MachineImage{{Version: "1", Base: "b.example/one"}, {Version: "2", Base: "b.example/two-shoot"}, {Version: "3", Base: "b.example/three"}}
	want.Arch, want.BakeSecrets = []string{"amd64"}, buildsettings.Bool(true)
	want.Preflight = &buildsettings.Preflight{Skip: []string{"layers"}, MaxAddedBytes: "1Gi", ExpectVersion: "{version}", FatalWarnings: buildsettings.Bool(true)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("refine:\n got %#v\nwant %#v", got, want)
	}
	if !reflect.DeepEqual(d, dBefore) || !reflect.DeepEqual(pc, pcBefore) {
		t.Errorf("refine changed its inputs")
	}
	if got := refine(d, nil); !reflect.DeepEqual(got, d) || got == d {
		t.Errorf("refine without a providerConfig: %#v, want a copy of the default", got)
	}
	// The default has no preflight: the providerConfig's.
	d.Preflight = nil
	if got := refine(d, pc); !reflect.DeepEqual(got.Preflight, pc.Preflight) {
		t.Errorf("preflight: %+v, want the providerConfig's %+v", got.Preflight, pc.Preflight)
	}
}

// oscWith is a reconcile OSC whose providerConfig is doc ("": none).
func oscWith(doc string) *extensionsv1alpha1.OperatingSystemConfig {
	osc := &extensionsv1alpha1.OperatingSystemConfig{}
	osc.Namespace, osc.Name = "shoot--p--s", "osc"
	if doc != "" {
		osc.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte("apiVersion: oslayer.os.extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfiguration\n" + doc)}
	}
	return osc
}

// writeDefault writes a default configuration document and loads it with
// the extension's namespace "ext".
func writeDefault(t *testing.T, doc string) (*Default, string, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "default.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: oslayer.os.extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfiguration\n"+doc), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := LoadDefault(file, "ext")
	return d, file, err
}

// TestLoadDefault: a valid default loads, its Secret references in the
// extension's namespace; an invalid one is refused naming the flag, the
// file and the field.
func TestLoadDefault(t *testing.T) {
	d, _, err := writeDefault(t, "target: r.example/os/{namespace}/{pool}\nregistrySecretRef: {name: push}\nsigning: {keySecretRef: {name: cosign, namespace: keys}}\n")
	if err != nil {
		t.Fatal(err)
	}
	if d.Config.RegistrySecretRef.Namespace != "ext" || d.Config.Signing.KeySecretRef.Namespace != "keys" {
		t.Errorf("namespaces: %+v %+v, want ext and keys", d.Config.RegistrySecretRef, d.Config.Signing.KeySecretRef)
	}
	if _, _, err := writeDefault(t, "preflight: {maxAddedBytes: 1Gi}\n"); err != nil {
		t.Errorf("a default of preflight options alone: %v", err)
	}
	for _, tc := range []struct{ doc, want string }{
		{"target: r.example/x\nbaseImage: b\n", `unknown field "baseImage"`},
		{"target: r.example/{cluster}\n", "target: Invalid value"},
		{"base: b.example/{pool}\n", "base: Invalid value"},
		{"images: [{base: b.example/x}]\n", "images[0].version: Required value"},
		{"registrySecretRef: {name: push}\n", "registrySecretRef: Invalid value: \"push\": needs target"},
		{"signing: {keySecretRef: {name: cosign}}\n", "signing.keySecretRef: Invalid value: \"cosign\": needs target"},
		{"target: r.example/x\nsigning: {keySecretRef: {}}\n", "signing.keySecretRef.name: Required value"},
	} {
		_, file, err := writeDefault(t, tc.doc)
		if err == nil || !strings.Contains(err.Error(), "--default-config "+file+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error naming --default-config %s and %s", tc.doc, err, file, tc.want)
		}
	}
	if _, err := LoadDefault(filepath.Join(t.TempDir(), "missing.yaml"), "ext"); err == nil || !strings.Contains(err.Error(), "--default-config") {
		t.Errorf("a missing file: %v", err)
	}
	file := filepath.Join(t.TempDir(), "default.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: oslayer.os.extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfiguration\ntarget: r.example/x\nregistrySecretRef: {name: push}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDefault(file, ""); err == nil || !strings.Contains(err.Error(), "registrySecretRef.namespace: Required value") {
		t.Errorf("no namespace known: %v", err)
	}
}

// TestConfigOf: an OSC's configuration is the default refined by its
// providerConfig, the default alone without one; errors name the field
// of the providerConfig or of the default that holds the value; a
// providerConfig may not change the target, registrySecretRef or
// signing key the default sets, nor name Secrets in the extension's
// namespace.
func TestConfigOf(t *testing.T) {
	d, file, err := writeDefault(t, `target: r.example/os/{namespace}/{pool}
base: b.example/fcos:{version}
registrySecretRef: {name: push}
signing: {keySecretRef: {name: cosign}}
preflight: {maxAddedBytes: 500Mi}
`)
	if err != nil {
		t.Fatal(err)
	}
	a := &Actuator{options: Options{Default: d, Namespace: "ext"}}
	c, err := a.configOf(oscWith(""))
	if err != nil || !reflect.DeepEqual(c.OperatingSystemConfiguration, d.Config) {
		t.Fatalf("no providerConfig: %#v, %v; want the default", c, err)
	}
	if got := c.field("signing.keySecretRef"); got != "--default-config "+file+": signing.keySecretRef" {
		t.Errorf("field of the default's signing key: %q", got)
	}
	c, err = a.configOf(oscWith("preflight: {maxAddedBytes: 1Gi}\nimages: [{version: '1', base: b.example/one}]\ntarget: r.example/os/{namespace}/{pool}\n"))
	if err != nil || c.Preflight.MaxAddedBytes != "1Gi" || c.RegistrySecretRef.Namespace != "ext" || len(c.Images) != 1 {
		t.Fatalf("a refining providerConfig: %#v, %v", c, err)
	}
	for name, want := range map[string]string{
		"preflight.maxAddedBytes": "spec.providerConfig.preflight.maxAddedBytes", "images": "spec.providerConfig.images",
		"target": "spec.providerConfig.target", "base": "--default-config " + file + ": base",
		"registrySecretRef": "--default-config " + file + ": registrySecretRef", "preflight.skip[0]": "spec.providerConfig.preflight.skip[0]",
	} {
		if got := c.field(name); got != want {
			t.Errorf("field %s: %q, want %q", name, got, want)
		}
	}
	for _, tc := range []struct{ doc, want string }{
		{"target: r.example/elsewhere/{pool}\n", "spec.providerConfig.target: set by the extension's default configuration (--default-config " + file + ") to r.example/os/{namespace}/{pool}; a shoot may not change it"},
		{"registrySecretRef: {name: mine}\n", "spec.providerConfig.registrySecretRef: set with the target by the extension's default configuration"},
		{"registrySecretRef: {name: push}\n", "spec.providerConfig.registrySecretRef: set with the target by the extension's default configuration (--default-config " + file + ") to ext/push; a shoot may not set it"},
		{"signing: {keySecretRef: {name: mine}}\n", "spec.providerConfig.signing: set with the target by the extension's default configuration (--default-config " + file + ") to ext/cosign"},
		{"signing: {keySecretRef: {name: cosign}, referrers: true}\n", "spec.providerConfig.signing: set with the target"},
		{"signing: {keySecretRef: {name: cosign, namespace: ext}}\n", "spec.providerConfig.signing.keySecretRef.namespace: \"ext\" is the extension's own namespace"},
		{"baseImage: x\n", `spec.providerConfig: strict decoding error: unknown field "baseImage"`},
		{"preflight: {expectVersion: '{x}'}\nbase: b.example/{pool}\n", "spec.providerConfig.base: Invalid value"},
	} {
		if _, err := a.configOf(oscWith(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %s", tc.doc, err, tc.want)
		}
	}
	// The same target, repeated, is no change.
	if _, err := a.configOf(oscWith("target: r.example/os/{namespace}/{pool}\n")); err != nil {
		t.Errorf("the default's target repeated: %v", err)
	}
}

// TestConfigOfPartialDefault: a default without a target leaves the
// target, credentials and signing to the providerConfig (its Secrets in
// the OSC's namespace); an OSC without providerConfig then lacks a target.
func TestConfigOfPartialDefault(t *testing.T) {
	d, file, err := writeDefault(t, "base: b.example/fcos:{version}\npreflight: {maxAddedBytes: 500Mi}\n")
	if err != nil {
		t.Fatal(err)
	}
	a := &Actuator{options: Options{Default: d, Namespace: "ext"}}
	if _, err := a.configOf(oscWith("")); err == nil || !strings.Contains(err.Error(), "spec.providerConfig.target: Required value") ||
		!strings.Contains(err.Error(), "--default-config "+file) {
		t.Errorf("no target anywhere: %v", err)
	}
	c, err := a.configOf(oscWith("target: r.example/mine/{pool}\nregistrySecretRef: {name: mine}\nsigning: {keySecretRef: {name: key}}\n"))
	if err != nil || c.Target != "r.example/mine/{pool}" || c.RegistrySecretRef.Name != "mine" || c.RegistrySecretRef.Namespace != "" ||
		c.Base != "b.example/fcos:{version}" || c.field("registrySecretRef") != "spec.providerConfig.registrySecretRef" {
		t.Errorf("a providerConfig with its own target: %#v, %v", c, err)
	}
	// Without a default a providerConfig is required and complete.
	a = &Actuator{options: Options{Namespace: "ext"}}
	if _, err := a.configOf(oscWith("")); err == nil || !strings.Contains(err.Error(), "spec.providerConfig: missing") {
		t.Errorf("no default, no providerConfig: %v", err)
	}
	if _, err := a.configOf(oscWith("target: r.example/x\n")); err == nil || !strings.Contains(err.Error(), "spec.providerConfig.base: Required value") {
		t.Errorf("no default, no base: %v", err)
	}
	if _, err := a.configOf(oscWith("target: r.example/x\nbase: b.example/y\nregistrySecretRef: {name: push, namespace: ext}\n")); err == nil ||
		!strings.Contains(err.Error(), "spec.providerConfig.registrySecretRef.namespace") {
		t.Errorf("no default, a Secret of the extension's namespace: %v", err)
	}
	// Nor another shoot's.
	for doc, f := range map[string]string{
		"registrySecretRef: {name: push, namespace: shoot--p--other}\n":      "registrySecretRef",
		"signing: {keySecretRef: {name: key, namespace: shoot--p--other}}\n": "signing.keySecretRef",
	} {
		want := "spec.providerConfig." + f + ".namespace: \"shoot--p--other\" is not the OSC's namespace \"shoot--p--s\""
		if _, err := a.configOf(oscWith("target: r.example/x\nbase: b.example/y\n" + doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("no default, %s of another shoot's namespace: %v, want %s", f, err, want)
		}
	}
	// A providerConfig names the shoot's resource, never a namespace.
	if _, err := a.configOf(oscWith("target: r.example/x\nbase: b.example/y\nregistrySecretRef: {name: push, namespace: shoot--p--s}\n")); err == nil ||
		!strings.Contains(err.Error(), "spec.providerConfig.registrySecretRef.namespace: \"shoot--p--s\": a providerConfig names a Secret by its entry in Shoot.spec.resources") {
		t.Errorf("no default, a Secret of the OSC's namespace: %v", err)
	}
}
