package v1alpha1

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/oslayer/oslayer/pipeline/settings"
)

// TestSettingsInline: the build settings are fields of spec itself (the
// embedding is inline), as they were before settings.Settings: a spec
// written with them decodes into the embedded settings and encodes back
// to the same document.
func TestSettingsInline(t *testing.T) {
	doc := `{"source":{"documents":{"objects":[{"kind":"ConfigMap","name":"mcs"}]}},"base":"b.example/fcos:1","target":"r.example/os/w:1",` +
		`"baseIndex":"off","preflight":{"skip":["layers"],"expectVersion":"42","fatalWarnings":true,"maxAddedBytes":"1Gi","warnLayers":50,"maxLayers":60},` +
		`"bakeSecrets":true,"strict":false,"allowTopLevel":["data"]}`
	var s PoolImageSpec
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatal(err)
	}
	want := settings.Settings{BaseIndex: "off", BakeSecrets: settings.Bool(true), Strict: settings.Bool(false), AllowTopLevel: []string{"data"},
		Preflight: &settings.Preflight{Skip: []string{"layers"}, ExpectVersion: "42", FatalWarnings: settings.Bool(true), MaxAddedBytes: "1Gi",
			WarnLayers: 50, MaxLayers: 60}}
	if !reflect.DeepEqual(s.Settings, want) {
		t.Errorf("settings %+v, want %+v", s.Settings, want)
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var a, b map[string]any
	if err := json.Unmarshal([]byte(doc), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("encoded\n %s\nwant\n %s", out, doc)
	}
	c := s.DeepCopy()
	c.Preflight.Skip[0], *c.BakeSecrets = "size", false
	if s.Preflight.Skip[0] != "layers" || !*s.BakeSecrets {
		t.Error("DeepCopy shares the settings")
	}
}
