package main

import (
	"runtime/debug"
	"strings"
)

// version is oslayer's version: shown by --version, recorded in the image's
// version label, the provenance's builder version and the User-Agent.
// A release build sets it at link time (-ldflags "-X main.version=v1.2.3",
// as the Containerfile does); otherwise it comes from the build info.
var version = "dev"

func init() { version = resolveVersion(version, debug.ReadBuildInfo) }

// resolveVersion picks, in order: a version set at link time; the module
// version of "go install github.com/oslayer/oslayer/cmd/oslayer@v1.2.3"
// (or the pseudo-version the go command derives from the checkout's VCS
// state); the VCS revision stamped into a build of a checkout
// ("devel-<revision>", "-dirty" with uncommitted changes); else "dev".
func resolveVersion(linked string, read func() (*debug.BuildInfo, bool)) string {
	if linked != "" && linked != "dev" {
		return linked
	}
	info, ok := read()
	if !ok {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "devel-" + rev
	if dirty {
		v += "-dirty"
	}
	return strings.TrimSpace(v)
}
