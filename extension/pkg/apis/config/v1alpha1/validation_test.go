package v1alpha1_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

const header = `apiVersion: oslayer.os.extensions.gardener.cloud/v1alpha1
kind: OperatingSystemConfiguration
`

// TestValidate: a valid providerConfig decodes and validates; each
// invalid one is refused with an error naming its field.
func TestValidate(t *testing.T) {
	valid := header + `target: registry.example/os/{namespace}/{pool}
base: quay.io/fedora/fedora-coreos:{version}
images:
- {version: "43.1", base: "quay.io/fedora/fedora-coreos@sha256:0000000000000000000000000000000000000000000000000000000000000000"}
signing: {keySecretRef: {name: cosign}}
registrySecretRef: {name: push}
`
	c, err := v1alpha1.Decode([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	if errs := v1alpha1.Validate(c, field.NewPath("spec", "providerConfig")); len(errs) > 0 {
		t.Fatalf("valid config: %v", errs)
	}
	for _, tc := range []struct{ doc, field string }{
		{`base: b.example/x` + "\n", "spec.providerConfig.target"},
		{`target: r.example/{cluster}` + "\nbase: b.example/x\n", "spec.providerConfig.target"},
		{`target: r.example/x@sha256:00` + "\nbase: b.example/x\n", "spec.providerConfig.target"},
		{`target: r.example/x` + "\n", "spec.providerConfig.base"},
		{`target: r.example/x` + "\nbase: b.example/{pool}\n", "spec.providerConfig.base"},
		{`target: r.example/x` + "\nimages: [{version: '1', base: b.example/x}, {version: '1', base: b.example/y}]\n", "spec.providerConfig.images[1].version"},
		{`target: r.example/x` + "\nimages: [{base: b.example/x}]\n", "spec.providerConfig.images[0].version"},
		{`target: r.example/x` + "\nbase: b.example/x\nsigning: {keySecretRef: {}}\n", "spec.providerConfig.signing.keySecretRef.name"},
		{`target: r.example/x` + "\nbase: b.example/x\nregistrySecretRef: {namespace: ns1}\n", "spec.providerConfig.registrySecretRef.name"},
		{`target: r.example/x` + "\nbase: b.example/x\nallowTopLevel: [a/b]\n", "spec.providerConfig.allowTopLevel[0]"},
	} {
		c, err := v1alpha1.Decode([]byte(header + tc.doc))
		if err != nil {
			t.Fatalf("%q: %v", tc.doc, err)
		}
		errs := v1alpha1.Validate(c, field.NewPath("spec", "providerConfig"))
		if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.field) {
			t.Errorf("%q: %v, want an error naming %s", tc.doc, errs, tc.field)
		}
	}
	if _, err := v1alpha1.Decode([]byte(header + "target: r.example/x\nbaseImage: x\n")); err == nil || !strings.Contains(err.Error(), `unknown field "baseImage"`) {
		t.Errorf("unknown field: %v", err)
	}
}
