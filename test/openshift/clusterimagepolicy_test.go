package openshift

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/sign"
)

// crdFile is the ClusterImagePolicy CRD of the feature set that serves
// config.openshift.io/v1 at the pinned openshift/api version.
const crdFile = "config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_clusterimagepolicies-TechPreviewNoUpgrade.crd.yaml"

// validator validates objects against the CRD's v1 schema as the API
// server does on create: OpenAPI (types, enums, patterns, required) and
// the x-kubernetes-validations CEL rules.
type validator struct {
	openapi    validation.SchemaValidator
	structural *schema.Structural
	cel        *cel.Validator
}

func newValidator(t *testing.T) *validator {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/openshift/api: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), crdFile))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		t.Fatalf("%s: %v", crdFile, err)
	}
	var v1schema *apiextv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1" && v.Served {
			v1schema = v.Schema.OpenAPIV3Schema
		}
	}
	if crd.Spec.Group != "config.openshift.io" || crd.Spec.Names.Kind != "ClusterImagePolicy" || v1schema == nil {
		t.Fatalf("%s: no served v1 ClusterImagePolicy", crdFile)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1schema, &internal, nil); err != nil {
		t.Fatal(err)
	}
	sv, _, err := validation.NewSchemaValidator(&internal)
	if err != nil {
		t.Fatal(err)
	}
	st, err := schema.NewStructural(&internal)
	if err != nil {
		t.Fatal(err)
	}
	return &validator{openapi: sv, structural: st, cel: cel.NewValidator(st, true, celconfig.PerCallLimit)}
}

func (v *validator) validate(obj map[string]any) field.ErrorList {
	errs := validation.ValidateCustomResource(nil, obj, v.openapi)
	celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(j, &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestClusterImagePolicy: what `trust --cluster-image-policy` writes is a
// ClusterImagePolicy the CRD accepts (schema and CEL rules), for the
// repository and key given; objects the CRD must refuse are refused by
// this validator, so it can fail.
func TestClusterImagePolicy(t *testing.T) {
	v := newValidator(t)
	kp, err := sign.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	pubKey := string(kp.Public)
	b, err := sign.ClusterImagePolicy("registry.example.com:5000/os/worker", kp.Public)
	if err != nil {
		t.Fatal(err)
	}
	obj := decode(t, b)
	if errs := v.validate(obj); len(errs) > 0 {
		t.Fatalf("the CRD refuses the ClusterImagePolicy:\n%v\n%s", errs.ToAggregate(), b)
	}
	var p struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Scopes []string `json:"scopes"`
			Policy struct {
				RootOfTrust struct {
					PolicyType string `json:"policyType"`
					PublicKey  struct {
						KeyData []byte `json:"keyData"`
					} `json:"publicKey"`
				} `json:"rootOfTrust"`
				SignedIdentity struct {
					MatchPolicy string `json:"matchPolicy"`
				} `json:"signedIdentity"`
			} `json:"policy"`
		} `json:"spec"`
	}
	j, _ := json.Marshal(obj)
	if err := json.Unmarshal(j, &p); err != nil {
		t.Fatal(err)
	}
	if p.APIVersion != "config.openshift.io/v1" || p.Kind != "ClusterImagePolicy" ||
		len(p.Spec.Scopes) != 1 || p.Spec.Scopes[0] != "registry.example.com:5000/os/worker" ||
		p.Spec.Policy.RootOfTrust.PolicyType != "PublicKey" || string(p.Spec.Policy.RootOfTrust.PublicKey.KeyData) != pubKey ||
		p.Spec.Policy.SignedIdentity.MatchPolicy != "MatchRepository" {
		t.Errorf("ClusterImagePolicy:\n%s", b)
	}

	// The validator refuses what the API server refuses.
	for name, edit := range map[string]func(m map[string]any){
		"publicKey missing": func(m map[string]any) {
			delete(m["spec"].(map[string]any)["policy"].(map[string]any)["rootOfTrust"].(map[string]any), "publicKey")
		},
		"scope without a registry host": func(m map[string]any) {
			m["spec"].(map[string]any)["scopes"] = []any{"os/worker"}
		},
		"wildcard inside a scope": func(m map[string]any) {
			m["spec"].(map[string]any)["scopes"] = []any{"registry.*.com/os/worker"}
		},
		"unknown policyType": func(m map[string]any) {
			m["spec"].(map[string]any)["policy"].(map[string]any)["rootOfTrust"].(map[string]any)["policyType"] = "GPG"
		},
	} {
		bad := decode(t, b)
		edit(bad)
		if errs := v.validate(bad); len(errs) == 0 {
			t.Errorf("%s: the CRD validator accepts it", name)
		}
	}
	if _, err := sign.ClusterImagePolicy("registry.example.com/os/worker", []byte("not a key")); err == nil {
		t.Error("a ClusterImagePolicy for a key that is not one")
	}
}
