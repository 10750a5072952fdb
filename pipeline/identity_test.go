package pipeline

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/sign"
)

// TestIdentity: a specification's identity changes with every field that
// changes the published image, its checks or its signature (the signing
// identity and the referrer mode among them), and not with the pool's
// name, the target's tag, the input files' paths (only their content),
// the registry options or the key's password.
func TestIdentity(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	osc, same, other := write("a.yaml", "one"), write("b.yaml", "one"), write("c.yaml", "two")
	key := &sign.KeyMaterial{Source: "k", PEM: []byte("key one")}
	base := func() Spec {
		return Spec{
			Inputs:  Inputs{Pool: "worker", OSCs: []string{osc}},
			Base:    "registry.example.com/fcos@sha256:" + sixtyFour,
			Target:  "oci:" + dir + "/out:a",
			Signing: &Signing{Key: key, Identity: "registry.example.com/os/worker"},
		}
	}
	id := base().Identity()
	if base().Identity() != id {
		t.Fatal("identity not deterministic")
	}
	differs := map[string]func(*Spec){
		"signing identity": func(s *Spec) { s.Signing.Identity = "registry.example.com/os/other" },
		"referrer mode":    func(s *Spec) { s.Signing.Referrers = true },
		"signing key":      func(s *Spec) { s.Signing.Key = &sign.KeyMaterial{Source: "k", PEM: []byte("key two")} },
		"unsigned":         func(s *Spec) { s.Signing = nil },
		"input content":    func(s *Spec) { s.Inputs.OSCs = []string{other} },
		"base":             func(s *Spec) { s.Base = "registry.example.com/fcos:stable" },
		"platforms":        func(s *Spec) { s.Arch = platforms(t, "amd64,arm64") },
		"base index":       func(s *Spec) { s.BaseIndex = "off" },
		"repository":       func(s *Spec) { s.Target = "oci:" + dir + "/other:a" },
		"bakeSecrets":      func(s *Spec) { s.Inputs.BakeSecrets = true },
		"allowTopLevel":    func(s *Spec) { s.Inputs.AllowTopLevel = []string{"data"} },
		"epoch":            func(s *Spec) { s.Inputs.Epoch = time.Unix(1700000000, 0) },
		"preflight":        func(s *Spec) { s.Preflight.MaxLayers = 60 },
		"package stage":    func(s *Spec) { s.Packages = &Packages{Containerfile: []byte("FROM packages")} },
	}
	for name, change := range differs {
		s := base()
		change(&s)
		if s.Identity() == id {
			t.Errorf("%s: same identity", name)
		}
	}
	alike := map[string]func(*Spec){
		"pool name":      func(s *Spec) { s.Inputs.Pool = "infra" },
		"target tag":     func(s *Spec) { s.Target = "oci:" + dir + "/out:b" },
		"input path":     func(s *Spec) { s.Inputs.OSCs = []string{same} },
		"registry":       func(s *Spec) { s.Registry = &registry.Options{Insecure: []string{"example.com"}} },
		"key password":   func(s *Spec) { s.Signing.Password = sign.Password([]byte("x")) },
		"default budget": func(s *Spec) { s.Preflight.MaxAddedBytes = preflight.DefaultMaxAddedBytes },
		"x86_64 (amd64)": func(s *Spec) { s.Arch = platforms(t, "x86_64") },
	}
	for name, change := range alike {
		s := base()
		s.Arch = platforms(t, "amd64")
		want := s.Identity()
		change(&s)
		if s.Identity() != want {
			t.Errorf("%s: another identity", name)
		}
	}
}

const sixtyFour = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func platforms(t *testing.T, s string) Platforms {
	t.Helper()
	p, err := ParsePlatforms(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
