package sign

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/sources/model"
)

func TestBaseURI(t *testing.T) {
	d := "sha256:" + "ab"
	for _, c := range []struct{ ref, want string }{
		{"quay.io/fedora/fedora-coreos:stable", "docker://quay.io/fedora/fedora-coreos@" + d},
		{"quay.io/fedora/fedora-coreos@sha256:0000", "docker://quay.io/fedora/fedora-coreos@" + d},
		{"127.0.0.1:5000/fcos/base", "docker://127.0.0.1:5000/fcos/base@" + d},
		{"oci:examples/base", "oci:examples/base@" + d},
		{"oci:out/base:latest", "oci:out/base@" + d},
	} {
		if got := baseURI(c.ref, d); got != c.want {
			t.Errorf("baseURI(%q) = %q, want %q", c.ref, got, c.want)
		}
	}
}

// The provenance names inputs and a layout base relative to the working
// directory, never by where they are on the build machine.
func TestStatementPathsRelative(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	hex := strings.Repeat("cd", 32)
	b := &assemble.Built{
		Pool:  "worker",
		Flags: map[string]string{"pool": "worker", "base": "oci:" + filepath.Join(wd, "bases", "fcos") + ":stable"},
		Base:  assemble.Base{Ref: "oci:" + filepath.Join(wd, "bases", "fcos") + ":stable", Digest: v1.Hash{Algorithm: "sha256", Hex: hex}},
		Inputs: []model.Input{
			{Path: filepath.Join(wd, "pools", "worker-osc.yaml"), Kind: "OperatingSystemConfig", SHA256: hex},
			{Path: "mcs/00-worker.yaml", Kind: "MachineConfig", SHA256: hex},
		},
	}
	d, err := name.NewDigest("127.0.0.1:5000/os/worker@sha256:" + hex)
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewStatement(b, d, "v1")
	if err != nil {
		t.Fatal(err)
	}
	bd := st.Predicate.BuildDefinition
	if bd.ExternalParameters.Base != "oci:bases/fcos:stable" || bd.ExternalParameters.Flags["base"] != "oci:bases/fcos:stable" || b.Flags["base"] == "oci:bases/fcos:stable" {
		t.Errorf("externalParameters.base %q, flags %v (the build's flags: %v)", bd.ExternalParameters.Base, bd.ExternalParameters.Flags, b.Flags)
	}
	var uris []string
	for _, rd := range bd.ResolvedDependencies {
		uris = append(uris, rd.URI)
	}
	want := []string{"oci:bases/fcos@sha256:" + hex, "pools/worker-osc.yaml", "mcs/00-worker.yaml"}
	if strings.Join(uris, " ") != strings.Join(want, " ") {
		t.Errorf("resolvedDependencies URIs %q, want %q", uris, want)
	}
}

// The same inputs in another directory (a front-end's temporary one, as
// the extension's reconcile writes the OSC to oslayer-os-extension-RANDOM/)
// give the same statement and SBOM: inputs are named relative to the
// directory that holds them all, never by where it is.
func TestStatementSameInputsElsewhere(t *testing.T) {
	t.Chdir(t.TempDir())
	hex := strings.Repeat("cd", 32)
	d, err := name.NewDigest("127.0.0.1:5000/os/worker@sha256:" + hex)
	if err != nil {
		t.Fatal(err)
	}
	statement := func(dir string) ([]byte, []string) {
		b := &assemble.Built{
			Pool: "worker",
			Base: assemble.Base{Ref: "127.0.0.1:5000/fcos/base:stable", Digest: v1.Hash{Algorithm: "sha256", Hex: hex}},
			Inputs: []model.Input{
				{Path: filepath.Join(dir, "osc.yaml"), Kind: "OperatingSystemConfig", Name: "osc", SHA256: hex},
				{Path: filepath.Join(dir, "secretrefs", "000.yaml"), Kind: "Secret", Name: "ns/s", SHA256: hex},
			},
		}
		st, err := NewStatement(b, d, "v1")
		if err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var uris []string
		for _, rd := range st.Predicate.BuildDefinition.ResolvedDependencies[1:] {
			uris = append(uris, rd.URI)
		}
		return j, uris
	}
	one, uris := statement(filepath.Join(t.TempDir(), "oslayer-os-extension-1"))
	two, _ := statement(filepath.Join(t.TempDir(), "oslayer-os-extension-2"))
	if string(one) != string(two) {
		t.Errorf("the statements differ:\n%s\n%s", one, two)
	}
	if want := []string{"osc.yaml", "secretrefs/000.yaml"}; strings.Join(uris, " ") != strings.Join(want, " ") {
		t.Errorf("input URIs %q, want %q", uris, want)
	}
	// Files in unrelated directories: named relative to the one that holds
	// them all; one file alone: its name.
	if got := inputURIs([]model.Input{{Path: "/a/b/x.yaml"}, {Path: "/a/c/y.yaml"}, {Path: "-"}}); strings.Join(got, " ") != "b/x.yaml c/y.yaml -" {
		t.Errorf("inputURIs: %q", got)
	}
	if got := inputURIs([]model.Input{{Path: "/x.yaml"}, {Path: "/d/y.yaml"}}); strings.Join(got, " ") != "x.yaml d/y.yaml" {
		t.Errorf("inputURIs at the root: %q", got)
	}
}

// Modes in JSON are octal strings everywhere, trust's files included.
func TestTrustFileModeJSON(t *testing.T) {
	b, err := json.Marshal(TrustFile{Path: "policy.json", NodePath: "/etc/containers/policy.json", Mode: 0o644})
	if err != nil || string(b) != `{"path":"policy.json","nodePath":"/etc/containers/policy.json","mode":"0644"}` {
		t.Fatalf("%s, %v", b, err)
	}
	var f TrustFile
	if err := json.Unmarshal(b, &f); err != nil || f.Mode != 0o644 || f.Path != "policy.json" {
		t.Errorf("round trip: %+v, %v", f, err)
	}
}
