package main

import (
	"runtime/debug"
	"testing"
)

func TestResolveVersion(t *testing.T) {
	info := func(main string, settings ...string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/oslayer/oslayer", Version: main}}
			for i := 0; i+1 < len(settings); i += 2 {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
			}
			return bi, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	rev := "220daae5783a6304bccdd8e5f2e1a36f9d87565d"
	for _, c := range []struct {
		name, linked string
		read         func() (*debug.BuildInfo, bool)
		want         string
	}{
		{"ldflags win", "v1.2.3", info("v0.9.0"), "v1.2.3"},
		{"go install @version", "dev", info("v0.9.0"), "v0.9.0"},
		{"checkout pseudo-version", "dev", info("v0.0.0-20261122193534-220daae5783a+dirty", "vcs.revision", rev), "v0.0.0-20261122193534-220daae5783a+dirty"},
		{"devel with VCS", "dev", info("(devel)", "vcs.revision", rev, "vcs.modified", "false"), "devel-220daae5783a"},
		{"devel with VCS, modified", "", info("(devel)", "vcs.revision", rev, "vcs.modified", "true"), "devel-220daae5783a-dirty"},
		{"devel without VCS", "dev", info("(devel)"), "dev"},
		{"no build info", "dev", none, "dev"},
	} {
		if got := resolveVersion(c.linked, c.read); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// The root command's --version prints the resolved version.
func TestVersionFlag(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v7.7.7"
	out, err := runCLI(t, "--version")
	if err != nil || out != "oslayer version v7.7.7\n" {
		t.Errorf("--version: %q, %v", out, err)
	}
}
