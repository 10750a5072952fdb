package settings

import (
	"reflect"
	"testing"
)

func TestInherit(t *testing.T) {
	outer := Settings{BaseIndex: "off", Strict: Bool(true), AllowTopLevel: []string{"a"},
		Preflight: &Preflight{Skip: []string{"size"}, FatalWarnings: Bool(true), WarnLayers: 50, RequireBase: "r"}}
	inner := Settings{Strict: Bool(false), AllowTopLevel: []string{"b"},
		Preflight: &Preflight{Skip: []string{"units"}, MaxLayers: 60}}
	got := outer.Inherit(inner)
	want := Settings{BaseIndex: "off", Strict: Bool(false), AllowTopLevel: []string{"a", "b"},
		Preflight: &Preflight{Skip: []string{"size", "units"}, FatalWarnings: Bool(true), WarnLayers: 50, MaxLayers: 60, RequireBase: "r"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Inherit = %+v %+v, want %+v %+v", got, *got.Preflight, want, *want.Preflight)
	}
	if len(outer.AllowTopLevel) != 1 || len(outer.Preflight.Skip) != 1 {
		t.Errorf("Inherit changed its receiver: %+v", outer)
	}
	if got := (Settings{Strict: Bool(true)}).Inherit(Settings{}); !True(got.Strict) || got.Preflight != nil {
		t.Errorf("an unset inner level: %+v", got)
	}
}

func TestRefine(t *testing.T) {
	def := Settings{BaseIndex: "off", BakeSecrets: Bool(true), AllowTopLevel: []string{"a"},
		Preflight: &Preflight{Skip: []string{"size"}, FatalWarnings: Bool(true), MaxAddedBytes: "1Gi"}}
	pc := Settings{BakeSecrets: Bool(false), Strict: Bool(true), AllowTopLevel: []string{"b"},
		Preflight: &Preflight{Skip: []string{"units"}, FatalWarnings: Bool(false), MaxAddedBytes: "2Gi"}}
	got := def.Refine(pc)
	want := Settings{BaseIndex: "off", BakeSecrets: Bool(true), Strict: Bool(true), AllowTopLevel: []string{"b"},
		Preflight: &Preflight{Skip: []string{"units"}, FatalWarnings: Bool(true), MaxAddedBytes: "2Gi"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Refine = %+v %+v, want %+v %+v", got, *got.Preflight, want, *want.Preflight)
	}
}

func TestSet(t *testing.T) {
	s := Settings{Strict: Bool(false), BakeSecrets: Bool(true), Preflight: &Preflight{WarnLayers: 3}}
	got := s.Set()
	for k, want := range map[string]bool{"strict": false, "bakeSecrets": true, "baseIndex": false,
		"preflight.warnLayers": true, "preflight.maxLayers": false} {
		if got[k] != want {
			t.Errorf("Set()[%s] = %v, want %v", k, got[k], want)
		}
	}
}
