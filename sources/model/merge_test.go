package model_test

import (
	"strings"
	"testing"

	"github.com/oslayer/oslayer/sources/model"
)

func osc(field string) model.Origin {
	return model.Origin{Document: "osc.yaml", Kind: "OperatingSystemConfig", Name: "pool", Field: field}
}

func mc(field string) model.Origin {
	return model.Origin{Document: "mc.yaml", Kind: "MachineConfig", Name: "50-x", Field: field}
}

func ptr[T any](v T) *T { return &v }

func TestMergeSameContentTwice(t *testing.T) {
	a := &model.Config{
		Files:  []model.File{{Path: "/etc/x", Mode: 0o644, Data: []byte("x"), Origin: osc("spec.files[0]")}},
		Dirs:   []model.Dir{{Path: "/etc/d", Mode: 0o755, Origin: osc("")}},
		Links:  []model.Link{{Path: "/etc/l", Target: "/x", Origin: osc("")}},
		Units:  []model.Unit{{Name: "a.service", Contents: ptr("u"), Enabled: ptr(true), DropIns: []model.DropIn{{Name: "1.conf", Contents: "d"}}, Origin: osc("spec.units[0]")}},
		Inputs: []model.Input{{Path: "osc.yaml", Kind: "OperatingSystemConfig"}},
	}
	b := &model.Config{
		Files:      []model.File{{Path: "/etc/x", Mode: 0o644, Data: []byte("x"), Origin: mc("spec.config.storage.files[0]")}, {Path: "/etc/y", Mode: 0o600, Origin: mc("")}},
		Dirs:       []model.Dir{{Path: "/etc/d", Mode: 0o755, Origin: mc("")}},
		Links:      []model.Link{{Path: "/etc/l", Target: "/x", Origin: mc("")}},
		Units:      []model.Unit{{Name: "a.service", Contents: ptr("u"), Enabled: ptr(true), DropIns: []model.DropIn{{Name: "1.conf", Contents: "d"}}, Origin: mc("")}},
		KernelArgs: []string{"a=1"},
		Extensions: []string{"usbguard"},
		KernelType: "realtime",
		Runtime:    []model.Runtime{{Item: "spec.fips", Reason: "r"}},
		Warnings:   []string{"w"},
		Inputs:     []model.Input{{Path: "mc.yaml", Kind: "MachineConfig"}},
	}
	got, err := model.Merge(a, nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Files) != 2 || got.Files[0].Origin != osc("spec.files[0]") || len(got.Dirs) != 1 || len(got.Links) != 1 || len(got.Units) != 1 {
		t.Errorf("merged: %+v", got)
	}
	if len(got.KernelArgs) != 1 || got.KernelType != "realtime" || len(got.Runtime) != 1 || len(got.Warnings) != 1 || len(got.Inputs) != 2 || len(got.Extensions) != 1 {
		t.Errorf("merged lists: %+v", got)
	}
	// Inputs untouched.
	if len(a.Files) != 1 || len(b.Files) != 2 {
		t.Error("inputs modified")
	}
}

func TestMergeConflicts(t *testing.T) {
	file := func(o model.Origin, data string, mode uint32) *model.Config {
		return &model.Config{Files: []model.File{{Path: "/etc/x", Mode: mode, Data: []byte(data), Origin: o}}}
	}
	unit := func(o model.Origin, u model.Unit) *model.Config {
		u.Name, u.Origin = "a.service", o
		return &model.Config{Units: []model.Unit{u}}
	}
	const both = "osc.yaml (OperatingSystemConfig pool) F1 and mc.yaml (MachineConfig 50-x) F2"
	cases := []struct {
		name string
		a, b *model.Config
		want string
	}{
		{"content", file(osc("F1"), "a", 0o644), file(mc("F2"), "b", 0o644), "conflicting definitions of /etc/x: " + both + " (different content: 1 vs 1 bytes)"},
		{"mode", file(osc("F1"), "a", 0o644), file(mc("F2"), "a", 0o600), "conflicting definitions of /etc/x: " + both + " (mode 0644 vs 0600)"},
		{"file vs dir", file(osc("F1"), "a", 0o644), &model.Config{Dirs: []model.Dir{{Path: "/etc/x", Origin: mc("F2")}}}, "conflicting definitions of /etc/x: " + both + " (a file and a directory)"},
		{"link target", &model.Config{Links: []model.Link{{Path: "/etc/x", Target: "/a", Origin: osc("F1")}}}, &model.Config{Links: []model.Link{{Path: "/etc/x", Target: "/b", Origin: mc("F2")}}}, both + ` (link to "/a" vs "/b")`},
		{"dir mode", &model.Config{Dirs: []model.Dir{{Path: "/etc/x", Mode: 0o755, Origin: osc("F1")}}}, &model.Config{Dirs: []model.Dir{{Path: "/etc/x", Mode: 0o700, Origin: mc("F2")}}}, both + " (mode/owner 0755 0:0 vs 0700 0:0)"},
		{"runtime vs baked", &model.Config{Runtime: []model.Runtime{{Item: "/etc/x", Origin: osc("F1")}}}, file(mc("F2"), "a", 0o644), both + " (a runtime and a file)"},
		{"unit contents", unit(osc("F1"), model.Unit{Contents: ptr("a")}), unit(mc("F2"), model.Unit{Contents: ptr("b")}), "conflicting definitions of unit a.service: " + both + " (different contents)"},
		{"unit enabled", unit(osc("F1"), model.Unit{Enabled: ptr(true)}), unit(mc("F2"), model.Unit{Enabled: ptr(false)}), both + " (enabled true vs false)"},
		{"unit mask", unit(osc("F1"), model.Unit{}), unit(mc("F2"), model.Unit{Mask: true}), both + " (mask false vs true)"},
		{"unit drop-in", unit(osc("F1"), model.Unit{DropIns: []model.DropIn{{Name: "a.conf", Contents: "1"}}}), unit(mc("F2"), model.Unit{DropIns: []model.DropIn{{Name: "a.conf", Contents: "2"}}}), both + " (drop-in a.conf differs)"},
		{"kernelType", &model.Config{KernelType: "realtime"}, &model.Config{KernelType: "64k-pages"}, `conflicting kernelType "realtime"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := model.Merge(c.a, c.b)
			if err == nil || got != nil {
				t.Fatalf("no error: %+v", got)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error\n  %v\nwant substring\n  %s", err, c.want)
			}
		})
	}
}
