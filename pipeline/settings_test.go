package pipeline

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/pipeline/settings"
	"github.com/oslayer/oslayer/preflight"
)

func TestSetSettings(t *testing.T) {
	var s Spec
	if err := s.SetSettings(FullSettings()); err != nil {
		t.Fatal(err)
	}
	want := Preflight{Skip: []string{"layers"}, ExpectVersion: "42", FatalWarnings: true, DenyUsrOverride: true,
		RequireBase: "quay.io/fedora/fedora-coreos:stable", AllowSecrets: []string{"/etc/x"}, MaxAddedBytes: 1 << 30,
		WarnLayers: 50, MaxLayers: 60}
	if !reflect.DeepEqual(s.Preflight, want) {
		t.Errorf("Preflight = %+v, want %+v", s.Preflight, want)
	}
	if !s.Inputs.BakeSecrets || !s.Inputs.Strict || !reflect.DeepEqual(s.Inputs.AllowTopLevel, []string{"data"}) || s.BaseIndex != "off" {
		t.Errorf("Inputs %+v, BaseIndex %q", s.Inputs, s.BaseIndex)
	}
	// Settings without preflight reset what an earlier call set.
	if err := s.SetSettings(settings.Settings{}); err != nil || !reflect.DeepEqual(s.Preflight, Preflight{}) || s.Inputs.Strict {
		t.Errorf("empty settings: %v, %+v", err, s)
	}
	err := s.SetSettings(settings.Settings{Preflight: &settings.Preflight{MaxAddedBytes: "lots"}})
	var pe *Error
	if !errors.As(err, &pe) || pe.Field != "preflight.maxAddedBytes" || !strings.Contains(pe.Err.Error(), `"lots"`) {
		t.Errorf("maxAddedBytes lots: %v", err)
	}
}

func TestCheckSettings(t *testing.T) {
	// The layer limits' relation is the whole specification's.
	if err := CheckSettings(settings.Settings{Preflight: &settings.Preflight{WarnLayers: 600}}); err != nil {
		t.Errorf("warnLayers 600 alone: %v", err)
	}
	err := CheckSettings(settings.Settings{BaseIndex: "sometimes",
		Preflight: &settings.Preflight{Skip: []string{"nope"}, MaxAddedBytes: "lots"}})
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		for _, e := range unjoinAll(e) {
			var pe *Error
			if errors.As(e, &pe) {
				fields = append(fields, pe.Field)
			}
		}
	}
	want := []string{"preflight.maxAddedBytes", "baseIndex", "preflight.skip[0]"}
	if !reflect.DeepEqual(fields, want) {
		t.Errorf("fields %q, want %q (%v)", fields, want, err)
	}
}

func unjoinAll(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, unjoinAll(e)...)
	}
	return out
}

// TestFlagsTable: every field of settings.Settings has exactly one flag,
// whose Field is the JSON path of the field its Value points at.
func TestFlagsTable(t *testing.T) {
	s := settings.Settings{Preflight: &settings.Preflight{}}
	paths := jsonFields(reflect.ValueOf(&s).Elem(), "", map[uintptr]string{})
	seen := map[string]bool{}
	for _, fl := range Flags {
		addr := reflect.ValueOf(fl.Value(&s)).Pointer()
		if paths[addr] != fl.Field {
			t.Errorf("--%s: Field %q, but Value is %q", fl.Name, fl.Field, paths[addr])
		}
		if seen[fl.Field] {
			t.Errorf("--%s: a second flag of %s", fl.Name, fl.Field)
		}
		seen[fl.Field] = true
		if FlagOf(fl.Field+"[1]") == nil || FlagOf(fl.Field).Name != fl.Name {
			t.Errorf("FlagOf(%s) is not --%s", fl.Field, fl.Name)
		}
	}
	for _, p := range paths {
		if !seen[p] && p != "preflight" {
			t.Errorf("settings field %s has no flag in pipeline.Flags", p)
		}
	}
}

// jsonFields maps the address of each field under v to its JSON path.
func jsonFields(v reflect.Value, prefix string, out map[uintptr]string) map[uintptr]string {
	for i := 0; i < v.NumField(); i++ {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		f := v.Field(i)
		out[f.Addr().Pointer()] = prefix + name
		if f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct && !f.IsNil() {
			jsonFields(f.Elem(), prefix+name+".", out)
		}
	}
	return out
}

// TestFlagDefaults: the defaults the flags show are the specification's
// (preflight's) defaults.
func TestFlagDefaults(t *testing.T) {
	for field, want := range map[string]int64{"preflight.maxAddedBytes": preflight.DefaultMaxAddedBytes,
		"preflight.warnLayers": preflight.DefaultWarnLayers, "preflight.maxLayers": preflight.DefaultMaxLayers} {
		got, err := preflight.ParseBytes(FlagOf(field).Default)
		if err != nil || got != want {
			t.Errorf("--%s default %q is %d (%v), want %d", FlagOf(field).Name, FlagOf(field).Default, got, err, want)
		}
	}
}
