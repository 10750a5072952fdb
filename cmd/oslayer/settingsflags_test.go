package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/pipeline/settings"
)

// TestSettingsFlags: the flags registered from pipeline.Flags set their
// fields, keep their defaults, and --help shows them as pflag's own
// flags of those types would.
func TestSettingsFlags(t *testing.T) {
	var s settings.Settings
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	for _, g := range []string{pipeline.FlagsInputs, pipeline.FlagsIndex, pipeline.FlagsPreflight} {
		registerSettings(fs, g, &s)
	}
	if err := fs.Parse([]string{"--bake-secrets", "--strict=false", "--skip", "layers", "--skip", "size", "--warn-layers", "3"}); err != nil {
		t.Fatal(err)
	}
	want := settings.Settings{BaseIndex: "auto", BakeSecrets: settings.Bool(true), Strict: settings.Bool(false),
		Preflight: &settings.Preflight{Skip: []string{"layers", "size"}, WarnLayers: 3, MaxLayers: 500, MaxAddedBytes: "2GiB"}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("settings %+v %+v, want %+v %+v", s, *s.Preflight, want, *want.Preflight)
	}
	usage := fs.FlagUsages()
	for _, line := range []string{"--allow-secret stringArray", "--bake-secrets ", "--max-layers int", `(default "2GiB")`, "(default 500)"} {
		if !strings.Contains(usage, line) {
			t.Errorf("usage has no %q:\n%s", line, usage)
		}
	}
	for _, bad := range []string{"(default [])", "(default false)", "--strict bool"} {
		if strings.Contains(usage, bad) {
			t.Errorf("usage has %q:\n%s", bad, usage)
		}
	}
	if err := fs.Parse([]string{"--warn-layers", "many"}); err == nil {
		t.Error("--warn-layers many parsed")
	}
}

// TestSettingsFlagErrors: an error of pipeline naming a field names its
// flag.
func TestSettingsFlagErrors(t *testing.T) {
	f := preflightFlags{set: &settings.Settings{Preflight: &settings.Preflight{MaxAddedBytes: "lots"}}}
	if _, err := f.spec(); err == nil || !strings.HasPrefix(err.Error(), `--max-added-bytes "lots": `) {
		t.Errorf("maxAddedBytes lots: %v", err)
	}
	f.set.Preflight = &settings.Preflight{Skip: []string{"nope"}}
	if _, err := f.spec(); err == nil || !strings.HasPrefix(err.Error(), `--skip "nope": no such check`) {
		t.Errorf("skip nope: %v", err)
	}
}
